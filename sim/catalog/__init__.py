"""Bundled data: model configs, GPU datasheets and calibration profiles, each with its source.

Every loader accepts a catalog name or a path to a user's own file, and an unknown name raises
`CatalogError` listing the known ones. An unreadable or invalid file raises it too, naming the
file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sim.specs.base import error_lines
from sim.specs.gpu import GpuSpec
from sim.specs.hf_config import model_from_hf_config
from sim.specs.model import ModelSpec

CATALOG_DIR = Path(__file__).resolve().parent


class CatalogError(LookupError, ValueError):
    """An unknown catalog name or an unreadable catalog file.

    A ValueError as well as a LookupError: to a caller it is bad input, reported like any other
    invalid value (the CLI prints it and exits 2)."""


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
    if folder == "models" and path.is_dir():  # a HuggingFace model folder: its config.json
        if (path / "config.json").is_file():
            return path / "config.json"
        raise CatalogError(
            f"{path} is a folder without a config.json: give a model folder "
            "downloaded from HuggingFace, or the path of its config.json"
        )
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
    cfg = _read(path, json.loads, "JSON")
    if not isinstance(cfg, dict):
        raise CatalogError(f"{path}: not a model config.json (a JSON object of config fields)")
    name = path.stem if path.parent == CATALOG_DIR / "models" else str(name_or_path)
    try:
        return model_from_hf_config(cfg, name)
    except ValidationError as exc:
        raise CatalogError(
            f"{path}: not a usable model config: {'; '.join(error_lines(exc))}"
        ) from None
    except (KeyError, TypeError, ValueError) as exc:
        raise CatalogError(f"{path}: not a usable model config: {exc}") from None


@cache
def load_gpu(name_or_path: str) -> GpuSpec:
    """A catalog GPU by name ('h200') or a YAML file with GpuSpec's fields."""
    path = _resolve(name_or_path, "gpus", ".yaml", gpu_names())
    data = _read(path, yaml.safe_load, "YAML")
    try:
        return GpuSpec.model_validate(data)
    except ValidationError as exc:
        raise CatalogError(f"{path}: not a GPU spec: {'; '.join(error_lines(exc))}") from None


def _read(path: Path, parse: Callable[[str], Any], what: str) -> Any:
    """Parsed file content; CatalogError naming the file when it cannot be read or parsed."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{path}: cannot read it as a {what} text file ({exc})") from None
    try:
        return parse(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise CatalogError(f"{path}: not valid {what} ({exc})") from None
