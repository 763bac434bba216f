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

from pydantic import ValidationError

from sim.specs.base import error_lines
from sim.specs.gpu import GpuSpec
from sim.specs.hf_config import model_from_hf_config
from sim.specs.limits import LimitError, check_data, check_text_size
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


class _SyntaxError(Exception):
    """A YAML file's syntax error, with the parser's message."""


def _safe_yaml(text: str) -> Any:
    import yaml  # imported here: only GPU files are YAML, and `mlasim models` reads none

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _SyntaxError(str(exc)) from None


MAX_NAME_CHARS = 1024  # a catalog name or a path (file systems allow 255 per name, 4096 whole)


def _exists(path: Path, *, folder: bool = False) -> bool:
    """Whether `path` is a file (a folder if `folder`); False, not OSError, for a name too long
    or otherwise unusable."""
    try:
        return path.is_dir() if folder else path.is_file()
    except (OSError, ValueError):  # ENAMETOOLONG, an embedded NUL
        return False


def _resolve(name_or_path: str | Path, folder: str, suffix: str, known: list[str]) -> Path:
    what = folder.rstrip("s")
    if len(str(name_or_path)) > MAX_NAME_CHARS:
        raise CatalogError(
            f"{what} name of {len(str(name_or_path)):,} characters: a catalog name or a file path "
            f"is at most {MAX_NAME_CHARS}; known {what}s are {', '.join(known)}"
        )
    path = Path(name_or_path)
    if path.suffix and _exists(path):
        return path
    if folder == "models" and _exists(path, folder=True):  # a HuggingFace model folder
        if (path / "config.json").is_file():
            return path / "config.json"
        raise CatalogError(
            f"{path} is a folder without a config.json: give a model folder "
            "downloaded from HuggingFace, or the path of its config.json"
        )
    candidate = CATALOG_DIR / folder / f"{name_or_path}{suffix}"
    if _exists(candidate):
        return candidate
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
    except (KeyError, TypeError, ValueError, OverflowError, ZeroDivisionError) as exc:
        raise CatalogError(f"{path}: not a usable model config: {exc!s:.300}") from None


@cache
def load_gpu(name_or_path: str) -> GpuSpec:
    """A catalog GPU by name ('h200') or a YAML file with GpuSpec's fields."""
    path = _resolve(name_or_path, "gpus", ".yaml", gpu_names())
    data = _read(path, _safe_yaml, "YAML")
    try:
        return GpuSpec.model_validate(data)
    except ValidationError as exc:
        raise CatalogError(f"{path}: not a GPU spec: {'; '.join(error_lines(exc))}") from None


def _read(path: Path, parse: Callable[[str], Any], what: str) -> Any:
    """Parsed file content, within the size and shape limits (`sim.specs.limits`); CatalogError
    naming the file when it cannot be read or parsed, or is over a limit."""
    try:
        check_text_size(path.stat().st_size, str(path))
        text = path.read_text()
    except LimitError as exc:
        raise CatalogError(str(exc)) from None
    except UnicodeDecodeError:
        raise CatalogError(f"{path}: not a {what} text file (it is not UTF-8)") from None
    except OSError as exc:
        raise CatalogError(f"{path}: cannot read it as a {what} text file ({exc})") from None
    try:
        data = parse(text)
    except (json.JSONDecodeError, _SyntaxError) as exc:
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        raise CatalogError(f"{path}: not valid {what} ({first})") from None
    except (RecursionError, ValueError) as exc:  # nesting too deep; a number beyond int limits
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:200]
        raise CatalogError(f"{path}: not usable {what} ({why})") from None
    try:
        check_data(data, f"{path}: ")
    except LimitError as exc:
        raise CatalogError(str(exc)) from None
    return data
