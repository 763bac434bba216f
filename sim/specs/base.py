"""Shared base for every spec: frozen, no unknown fields, described fields."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Spec(BaseModel):
    """A validated, immutable value. Derived quantities are properties, never stored fields."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)
