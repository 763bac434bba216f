"""Calibration profiles by catalog name ('h800-published', 'h200-roofline') or path.

A profile is one JSON file (Parquet is not read). Bundled profiles live in `profiles/*.json`;
`kernels_calib.published` rebuilds the published and roofline ones from the kernel benchmarks
they cite. A profile's schema version is checked before
anything else, so a file from a newer format says so instead of failing field by field.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sim.catalog import CatalogError, _names, _read, _resolve
from sim.specs.base import error_lines
from sim.specs.profile import SUPPORTED_SCHEMA_VERSIONS, Profile, unsupported_version_message
from sim.specs.profile_checks import check_profile_shape

DATASHEET = "datasheet"  # a scenario's `profile:` for the bare datasheet roofline


def scenario_profile_name(
    profile: str | None, gpu_name: str, engine: str | None = None
) -> str | None:
    """The profile a scenario's (or probe's) `profile:` selects; None means the bare datasheet.

    Omitted: the production-kernel profile `<gpu>-<engine>` of the deployment's `engine` where
    one is bundled; else the GPU's bundled `<gpu>-roofline` (efficiencies and launch cost
    derived from published kernel benchmarks), or the datasheet for a GPU without one;
    `datasheet`: the bare datasheet roofline (efficiency 1, no launch cost: ideal physics);
    anything else: that profile's name or path.
    """
    if profile == DATASHEET:
        return None
    if profile is None:
        if engine is not None and f"{gpu_name}-{engine}" in profile_names():
            return f"{gpu_name}-{engine}"
        name = f"{gpu_name}-roofline"
        return name if name in profile_names() else None
    return profile


def profile_names() -> list[str]:
    """Names of the bundled profiles."""
    return _names("profiles", ".json")


def parse_profile(data: Any, origin: str) -> Profile:
    """A profile from parsed JSON; CatalogError for a wrong schema version or invalid content."""
    if not isinstance(data, dict) or "schema_version" not in data:
        raise CatalogError(f"{origin}: not a calibration profile (no 'schema_version' field)")
    if data["schema_version"] not in SUPPORTED_SCHEMA_VERSIONS:
        raise CatalogError(f"{origin}: {unsupported_version_message(data['schema_version'])}")
    check_profile_shape(data, origin)  # shapes that would crash or hang Profile (ValueErrors)
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        lines = "\n  ".join(error_lines(exc))
        raise CatalogError(f"{origin}: invalid calibration profile:\n  {lines}") from None


@cache
def load_profile(name_or_path: str | Path) -> Profile:
    """A bundled profile by name or a profile JSON file by path.

    Raises CatalogError for an unknown name (listing the known ones), a file that is not JSON,
    an unsupported schema version (naming the supported ones) or invalid content.
    """
    path = _resolve(name_or_path, "profiles", ".json", profile_names())
    if path.suffix != ".json":
        raise CatalogError(
            f"{path}: a calibration profile is a .json file (as kernels_calib writes it); "
            f"{path.suffix} files are not read"
        )
    return parse_profile(_read(path, json.loads, "JSON"), str(path))
