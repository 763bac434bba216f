"""Calibration profiles by catalog name ('h800-published', 'h200-roofline') or path.

Bundled profiles live in `profiles/*.json`; `kernels_calib.published` rebuilds the published and
roofline ones from the kernel benchmarks they cite. A profile's schema version is checked before
anything else, so a file from a newer format says so instead of failing field by field.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sim.catalog import CatalogError, _names, _resolve
from sim.specs.profile import SUPPORTED_SCHEMA_VERSIONS, Profile, unsupported_version_message


def profile_names() -> list[str]:
    """Names of the bundled profiles."""
    return _names("profiles", ".json")


def parse_profile(data: Any, origin: str) -> Profile:
    """A profile from parsed JSON; CatalogError for a wrong schema version or invalid content."""
    if not isinstance(data, dict) or "schema_version" not in data:
        raise CatalogError(f"{origin}: not a calibration profile (no 'schema_version' field)")
    if data["schema_version"] not in SUPPORTED_SCHEMA_VERSIONS:
        raise CatalogError(f"{origin}: {unsupported_version_message(data['schema_version'])}")
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        raise CatalogError(f"{origin}: invalid calibration profile:\n{exc}") from exc


@cache
def load_profile(name_or_path: str | Path) -> Profile:
    """A bundled profile by name or a profile JSON file by path.

    Raises CatalogError for an unknown name (listing the known ones), unreadable JSON, an
    unsupported schema version (naming the supported ones) or invalid content.
    """
    path = _resolve(name_or_path, "profiles", ".json", profile_names())
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CatalogError(f"{path}: not valid JSON ({exc})") from exc
    return parse_profile(data, str(path))
