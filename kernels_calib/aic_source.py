"""Reading aiconfigurator-core's per-op silicon tables from the installed package.

The PyPI package `aiconfigurator-core` (Apache-2.0, github.com/ai-dynamo/aiconfigurator) ships
`systems/data/<system>/<family>/<framework>/<version>/*.parquet`, latencies in ms measured with
the engines' own kernels, each folder beside a `collection_meta.yaml`. This module finds those
folders and reads them (pandas, for the converter only; the simulator never reads Parquet), and
refuses what it cannot read with the file and what is allowed.
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PACKAGE = "aiconfigurator-core"
# aiconfigurator system folder -> catalog GPU; B300, GB200 and GB300 wait for their GPU specs
SYSTEMS = {"h100_sxm": "h100", "h200_sxm": "h200", "b200_sxm": "b200"}
ENGINES = ("sglang", "trtllm", "vllm")
META_SCHEMA_VERSIONS = (1, 2)  # collection_meta.yaml versions (2 adds image and campaign data)


class AicError(ValueError):
    """A table that cannot be read: names the file and what is allowed."""


@dataclass(frozen=True)
class Source:
    """The installed package's data root and version."""

    root: Path
    version: str

    def system_dir(self, system: str) -> Path:
        if system not in SYSTEMS:
            raise AicError(
                f"unknown system {system!r}: the converter knows {', '.join(SYSTEMS)} "
                "(catalog GPUs h100, h200, b200)"
            )
        path = self.root / system
        if not path.is_dir():
            raise AicError(f"{path}: system folder missing from {PACKAGE} {self.version}")
        return path

    def versions(self, system: str, family: str, framework: str) -> list[str]:
        """Version folders of one family and framework, oldest first (none: [])."""
        base = self.system_dir(system) / family / framework
        if not base.is_dir():
            return []
        return sorted((p.name for p in base.iterdir() if p.is_dir()), key=version_key)

    def folder(self, system: str, family: str, framework: str, version: str) -> Path:
        return self.system_dir(system) / family / framework / version


def installed(root: Path | None = None) -> Source:
    """The installed package's data (or `root`, a folder laid out the same way)."""
    try:
        version = importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise AicError(
            f"{PACKAGE} is not installed: `pip install {PACKAGE}` (the validate extra installs "
            "it) to convert its tables"
        ) from None
    if root is None:
        root = Path(str(importlib.resources.files("aiconfigurator_core"))) / "systems" / "data"
    if not root.is_dir():
        raise AicError(f"{root}: no systems/data folder in {PACKAGE} {version}")
    return Source(root=root, version=version)


def check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise AicError(f"unknown engine {engine!r}: the converter knows {', '.join(ENGINES)}")


def version_key(version: str) -> tuple[Any, ...]:
    """Sort key for '0.5.6.post2', '1.3.0rc20', '2.29.2': numbers by value, a pre-release
    (rc, dev) before its release, a post-release after it."""
    parts: list[Any] = []
    for num, tag, tag_num in re.findall(r"(\d+)|(rc|dev|post)(\d*)", version):
        if num:
            parts.append((int(num), 0))
        else:
            rank = {"dev": -2, "rc": -1, "post": 1}[tag]
            parts.append((-1 if rank < 0 else 10**9, rank, int(tag_num or 0)))
    return tuple(parts)


def read_meta(folder: Path) -> dict[str, Any]:
    """A folder's collection_meta.yaml; AicError if missing, unreadable or of another schema."""
    path = folder / "collection_meta.yaml"
    if not path.is_file():
        raise AicError(f"{path}: missing (every converted table needs its collection_meta.yaml)")
    try:
        meta = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise AicError(f"{path}: unreadable ({exc})") from None
    if not isinstance(meta, dict) or meta.get("schema_version") not in META_SCHEMA_VERSIONS:
        got = meta.get("schema_version") if isinstance(meta, dict) else None
        raise AicError(
            f"{path}: collection_meta schema_version {got!r} is not supported; this converter "
            f"reads {', '.join(map(str, META_SCHEMA_VERSIONS))}"
        )
    return meta


def read_table(
    folder: Path, name: str, columns: tuple[str, ...], latencies: tuple[str, ...] = ("latency",)
) -> Any:
    """`<folder>/<name>.parquet` as a pandas DataFrame holding at least `columns`, its
    `latencies` columns all positive."""
    import pandas as pd  # the converter's dependency only

    path = folder / f"{name}.parquet"
    read_meta(folder)
    if not path.is_file():
        raise AicError(f"{path}: missing")
    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise AicError(f"{path}: not a readable Parquet table ({exc})") from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise AicError(
            f"{path}: columns {missing} missing; the converter reads {list(columns)} "
            f"(found {list(frame.columns)})"
        )
    for column in latencies:
        if (frame[column] <= 0).any():
            raise AicError(f"{path}: non-positive latencies in {column}")
    return frame
