"""Profile output: the model shape a profile records, and writing it as JSON."""

from __future__ import annotations

import json
from pathlib import Path

from sim.catalog import load_model
from sim.catalog.profiles import parse_profile
from sim.io.journal import write_atomic
from sim.specs.profile import ModelShape, Profile


def model_shape(model_name: str) -> ModelShape:
    """The MLA shape of a catalog model, as a profile records it."""
    model = load_model(model_name)
    m = model.mla_spec
    return ModelShape(
        model=model_name,
        heads=model.num_heads,
        kv_lora_rank=m.kv_lora_rank,
        qk_rope_head_dim=m.qk_rope_head_dim,
        qk_nope_head_dim=m.qk_nope_head_dim,
        v_head_dim=m.v_head_dim,
        hidden_size=model.hidden_size,
    )


# what a compact file leaves out: each point's achieved rates, recomputed when it is read
_RATES = {"tables": {"__all__": {"points": {"__all__": {"achieved_tflop_s", "achieved_gb_s"}}}}}


def write_profile(profile: Profile, path: Path, *, compact: bool = False) -> Path:
    """Write `profile` to `path` (parents created); raises ValueError if it does not round-trip.

    `compact`: no indentation and no achieved rates (large converted tables stay small)."""
    if compact:
        text = profile.model_dump_json(exclude_none=True, exclude=_RATES) + "\n"  # type: ignore[arg-type]
    else:
        text = profile.model_dump_json(indent=1, exclude_none=True) + "\n"
    if parse_profile(json.loads(text), str(path)) != profile:
        raise ValueError(f"profile {profile.name!r} does not read back identically")
    return write_atomic(path, text)  # a kill mid-write leaves the previous file, never half
