"""Shared base for every spec: frozen, no unknown fields, described fields."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError


class Spec(BaseModel):
    """A validated, immutable value. Derived quantities are properties, never stored fields."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)


def error_lines(exc: ValidationError) -> list[str]:
    """One `field.path: message` line per error of `exc` (no input dump, no docs URL), for
    callers that show validation errors to a user."""
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        lines.append(f"{where}: {msg}" if where else msg)
    return lines
