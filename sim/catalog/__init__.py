"""Bundled data: model configs, GPU datasheets and calibration profiles, each with its source.

Every loader accepts a catalog name or a path to a user's own file, and an unknown name raises
`CatalogError` listing the known ones.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from sim.specs.gpu import GpuSpec
from sim.specs.hf_config import model_from_hf_config
from sim.specs.model import ModelSpec

CATALOG_DIR = Path(__file__).resolve().parent


class CatalogError(LookupError):
    """An unknown catalog name or an unreadable catalog file."""


def _names(folder: str, suffix: str) -> list[str]:
    return sorted(p.name.removesuffix(suffix) for p in (CATALOG_DIR / folder).glob(f"*{suffix}"))


def model_names() -> list[str]:
    return _names("models", ".json")


def gpu_names() -> list[str]:
    return _names("gpus", ".yaml")


def _resolve(name_or_path: str | Path, folder: str, suffix: str, known: list[str]) -> Path:
    path = Path(name_or_path)
    if path.suffix and path.exists():
        return path
    candidate = CATALOG_DIR / folder / f"{name_or_path}{suffix}"
    if candidate.exists():
        return candidate
    what = folder.rstrip("s")
    raise CatalogError(
        f"unknown {what} {str(name_or_path)!r}: known {what}s are {', '.join(known)}; "
        f"or give a path to an existing {suffix} file"
    )


@cache
def load_model(name_or_path: str) -> ModelSpec:
    """A catalog model by name ('deepseek-v3') or a HuggingFace config.json path."""
    path = _resolve(name_or_path, "models", ".json", model_names())
    try:
        cfg: dict[str, Any] = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CatalogError(f"{path}: not valid JSON ({exc})") from exc
    name = path.stem if path.parent == CATALOG_DIR / "models" else str(name_or_path)
    return model_from_hf_config(cfg, name)


@cache
def load_gpu(name_or_path: str) -> GpuSpec:
    """A catalog GPU by name ('h200') or a YAML file with GpuSpec's fields."""
    path = _resolve(name_or_path, "gpus", ".yaml", gpu_names())
    return GpuSpec.model_validate(yaml.safe_load(path.read_text()))
