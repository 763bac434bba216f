"""Catalog errors are bad input (ValueError) as well as failed look-ups, and name the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.catalog import CatalogError, load_gpu, load_model
from sim.catalog.profiles import load_profile


def test_catalog_error_is_a_value_error_and_a_lookup_error() -> None:
    for call in (lambda: load_model("deepseek-v9"), lambda: load_profile("h900-measured")):
        with pytest.raises(ValueError, match="known"):
            call()
    with pytest.raises(LookupError, match="known gpus are"):
        load_gpu("h900")


def test_unreadable_files_name_themselves(tmp_path: Path) -> None:
    gpu = tmp_path / "g.yaml"
    gpu.write_text("name: [h200\n")
    with pytest.raises(CatalogError, match=f"{gpu}: not valid YAML"):
        load_gpu(str(gpu))
    gpu.write_text("name: g\n")
    with pytest.raises(CatalogError, match=f"{gpu}: not a GPU spec: .*Field required"):
        load_gpu(str(gpu))
    model = tmp_path / "m.json"
    model.write_text("[1, 2]")
    with pytest.raises(CatalogError, match=f"{model}: not a model config.json"):
        load_model(str(model))


def test_a_parquet_profile_is_refused_with_the_reason(tmp_path: Path) -> None:
    p = tmp_path / "p.parquet"
    p.write_bytes(b"PAR1\x00\xff")
    with pytest.raises(CatalogError, match=r"a calibration profile is a \.json file"):
        load_profile(str(p))
