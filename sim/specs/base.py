"""Shared base for every spec: frozen, no unknown fields, described fields."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError


class Spec(BaseModel):
    """A validated, immutable value. Derived quantities are properties, never stored fields."""

    # ser_json_inf_nan: a spec's JSON (how the process and Ray backends hand a scenario to a
    # worker) must read back as the same spec; pydantic's default writes inf (a benchmark's
    # request_rate) as null, which the float field then refuses.
    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_default=True, ser_json_inf_nan="strings"
    )


def error_lines(exc: ValidationError) -> list[str]:
    """One `field.path: message` line per error of `exc` (no input dump, no docs URL), for
    callers that show validation errors to a user."""
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        lines.append(f"{where}: {msg}" if where else msg)
    return lines
