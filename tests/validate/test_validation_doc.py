"""docs/validation.md shows what `tools/validation_table.py` prints today, row for row."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import validation_table  # noqa: E402


@pytest.mark.slow
def test_doc_tables_are_the_tools_output() -> None:
    doc = (ROOT / "docs" / "validation.md").read_text()
    rows = [r for r in validation_table.table().splitlines() if r.strip()]
    assert len(rows) > 10
    stale = [r for r in rows if r not in doc]
    assert not stale, "rerun `python tools/validation_table.py` and update docs/validation.md"


def test_launch_overhead_override_changes_only_that_factor() -> None:
    from sim.catalog.profiles import load_profile

    p = load_profile("h800-published")
    q = validation_table.with_launch_overhead(p, 0.5)
    assert q.roofline.launch_overhead_us.value == 0.5
    assert q.roofline.launch_overhead_us.source == p.roofline.launch_overhead_us.source
    assert q.roofline.gemm_compute_efficiency == p.roofline.gemm_compute_efficiency
    assert q.tables == p.tables
    # fewer launch costs make the small-batch TBO penalty smaller
    assert validation_table.tbo_small_batch(profile=q) < validation_table.tbo_small_batch(profile=p)
