"""Production-kernel profiles converted from aiconfigurator-core: rebuilt from the installed
package they equal the bundled files; they stay small and load fast; bad input is refused by
name. (Every point of every bundled table coming back exactly, and monotonicity on every GPU,
are `test_table_monotone`'s, which runs over every bundled profile.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernels_calib import aic_source as src
from kernels_calib.published_aic import BUNDLED, build
from kernels_calib.writer import write_profile
from sim.catalog.profiles import load_profile, parse_profile

PROFILES = Path(__file__).resolve().parents[2] / "sim" / "catalog" / "profiles"
NAMES = [f"{s.split('_')[0]}-{e}" for s, e in BUNDLED]


def _installed() -> src.Source:
    pytest.importorskip("pandas")
    pytest.importorskip("aiconfigurator_core")
    return src.installed()


@pytest.mark.parametrize(("system", "engine"), BUNDLED)
def test_rebuilt_from_the_installed_package_equals_the_bundled_file(
    system: str, engine: str, tmp_path: Path
) -> None:
    profile = build(system, engine, s=_installed())
    out = write_profile(profile, tmp_path / f"{profile.name}.json", compact=True)
    assert out.read_text() == (PROFILES / f"{profile.name}.json").read_text()


def test_bundled_files_are_compact() -> None:
    """At most 10 MB together; their load time is a benchmark (`bench/bench_profiles.py`, run by
    `make bench`), not a timed test on a shared machine."""
    total = sum((PROFILES / f"{n}.json").stat().st_size for n in NAMES)
    assert total <= 10_000_000
    for name in NAMES:
        path = PROFILES / f"{name}.json"
        assert parse_profile(json.loads(path.read_text()), str(path)).tables


def test_every_table_keeps_its_provenance() -> None:
    for name in NAMES:
        profile = load_profile(name)
        assert profile.engine and profile.engine_version
        assert profile.provenance["package"].startswith(src.PACKAGE)
        for table in profile.tables:
            assert table.kernel_source and src.PACKAGE in table.source
            # DeepEP's two modes come from two files of one version folder
            assert table.source in profile.provenance[table.op].split("; ")


def test_skewed_moe_tables_sit_beside_balanced_ones() -> None:
    profile = load_profile("h200-trtllm")
    alphas = {t.key["power_law_alpha"] for t in profile.tables if t.op == "moe"}
    assert alphas == {0.0, 1.01, 1.2}


def test_a_family_without_an_expanded_prefill_table_is_noted_for_the_roofline() -> None:
    notes = " ".join(load_profile("h200-sglang").notes)
    assert "mla_prefill" in notes and "roofline prices it" in notes
    assert not [t for t in load_profile("h200-sglang").tables if t.op == "mla_prefill"]


def _copy(tmp_path: Path) -> src.Source:
    """A one-system copy of the installed data (only what the test breaks is changed)."""
    real = _installed()
    root = tmp_path / "data"
    shutil.copytree(real.root / "h200_sxm", root / "h200_sxm")
    return src.Source(root=root, version=real.version)


def test_unknown_system_and_engine_name_what_is_allowed(tmp_path: Path) -> None:
    s = _copy(tmp_path)
    with pytest.raises(src.AicError, match=r"unknown system 'gb300'.*h200_sxm"):
        build("gb300", "sglang", s=s)
    with pytest.raises(src.AicError, match=r"unknown engine 'tgi'.*sglang, trtllm, vllm"):
        build("h200_sxm", "tgi", s=s)


def test_unreadable_parquet_is_named(tmp_path: Path) -> None:
    s = _copy(tmp_path)
    bad = s.root / "h200_sxm" / "gemm" / "sglang" / "0.5.14" / "gemm_perf.parquet"
    bad.write_bytes(b"not parquet")
    with pytest.raises(src.AicError, match=r"gemm_perf\.parquet: not a readable Parquet"):
        build("h200_sxm", "sglang", s=s)


def test_missing_meta_and_newer_meta_schema_are_named(tmp_path: Path) -> None:
    s = _copy(tmp_path)
    meta = s.root / "h200_sxm" / "gemm" / "sglang" / "0.5.14" / "collection_meta.yaml"
    meta.write_text("schema_version: 9\n")
    with pytest.raises(src.AicError, match=r"collection_meta\.yaml: .*schema_version 9.*1, 2"):
        build("h200_sxm", "sglang", s=s)
    meta.unlink()
    with pytest.raises(src.AicError, match=r"collection_meta\.yaml: missing"):
        build("h200_sxm", "sglang", s=s)


def test_missing_column_is_named(tmp_path: Path) -> None:
    import pandas as pd

    s = _copy(tmp_path)
    path = s.root / "h200_sxm" / "moe" / "sglang" / "0.5.14" / "moe_perf.parquet"
    pd.read_parquet(path).drop(columns=["distribution"]).to_parquet(path)
    with pytest.raises(src.AicError, match=r"moe_perf\.parquet: columns \['distribution'\]"):
        build("h200_sxm", "sglang", s=s)


def test_a_missing_family_is_priced_by_the_roofline_and_says_so(tmp_path: Path) -> None:
    s = _copy(tmp_path)
    shutil.rmtree(s.root / "h200_sxm" / "moe" / "sglang")
    profile = build("h200_sxm", "sglang", s=s)
    assert not [t for t in profile.tables if t.op == "moe"]
    assert any(n.startswith("moe: no moe/sglang") and "roofline" in n for n in profile.notes)
