"""Shared base for every spec: frozen, no unknown fields, described fields."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, ValidationError


class Spec(BaseModel):
    """A validated, immutable value. Derived quantities are properties, never stored fields."""

    # ser_json_inf_nan: a spec's JSON (how the process and Ray backends hand a scenario to a
    # worker) must read back as the same spec; pydantic's default writes inf (a benchmark's
    # request_rate) as null, which the float field then refuses.
    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_default=True, ser_json_inf_nan="strings"
    )


class FieldError(ValueError):
    """A value error that knows its field.

    `loc` is the path from the object being validated to the field (`("deployments", 1,
    "attn_tp")`, `("model",)`), as pydantic's own errors give theirs; `message` says what is
    wrong without the location (what a caller that prints the field itself shows), and `str()`
    is the whole sentence. Raised inside a validator, pydantic keeps it in the error's `ctx`, so
    `sim.io.scenario_io` finds the field's line from `loc` without reading the text.
    """

    def __init__(self, loc: Sequence[str | int], message: str, text: str | None = None) -> None:
        super().__init__(text if text is not None else message)
        self.loc: tuple[str | int, ...] = tuple(loc)
        self.message = message


def field_error(exc: object) -> FieldError | None:
    """The `FieldError` behind one of pydantic's `errors()` entries, if a validator raised one."""
    ctx = exc.get("ctx") if isinstance(exc, dict) else None
    err = ctx.get("error") if isinstance(ctx, dict) else None
    return err if isinstance(err, FieldError) else None


def error_lines(exc: ValidationError) -> list[str]:
    """One `field.path: message` line per error of `exc` (no input dump, no docs URL), for
    callers that show validation errors to a user."""
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        lines.append(f"{where}: {msg}" if where else msg)
    return lines
