"""Candidates run cheapest first; once the top K of a kind meet the SLO, dearer ones of that
kind are skipped as dominated, with their reason, and `simulate_all` turns that off."""

from __future__ import annotations

from typing import Any

import pytest

from sim.plan import order
from sim.plan.run import Candidate
from sim.plan.space import Layout
from sim.search.backends import SerialBackend
from tests.plan.plan_helpers import tiny


def _cands(kind: str, gpus: list[int]) -> list[Candidate]:
    return [
        Candidate(Layout("h200", kind, {"name": f"{kind}{g}"}, 8, f"{kind}{g}"), g // 8, "m")
        for g in gpus
    ]


def _fake_runs(monkeypatch: pytest.MonkeyPatch, meets_from_gpus: int) -> list[list[int]]:
    """run_candidates replaced: a candidate meets the SLO from `meets_from_gpus` GPUs up."""
    waves: list[list[int]] = []

    def run(batch: list[Candidate], req: Any, *a: Any) -> list[dict[str, Any]]:
        waves.append([c.gpus for c in batch])
        return [{"id": f"{c.layout.kind}{c.gpus}", "kind": c.layout.kind,
                 "slo_met": c.gpus >= meets_from_gpus, "gpus": c.gpus} for c in batch]  # fmt: skip

    monkeypatch.setattr(order, "run_candidates", run)
    return waves


def test_dearer_candidates_than_the_top_k_are_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    waves = _fake_runs(monkeypatch, meets_from_gpus=16)
    cands = _cands("unit", [64, 8, 48, 16, 40, 24, 56, 32, 72]) + _cands("pd", [80, 88])
    rows, dominated = order.simulate_cheapest_first(cands, tiny(top=2), SerialBackend())
    assert waves[0] == [8, 16, 24, 32]  # cheapest first, a wave of four
    # 16 and 24 GPUs met the SLO: no other unit above 24 GPUs can enter the top 2 units...
    assert sorted(r["replicas"] * 8 for r in dominated) == [40, 48, 56, 64, 72]
    assert all(r["rule"] == "dominated" for r in dominated)
    assert (
        "more than the 2 cheapest colocated units already meeting the SLO"
        in (dominated[0]["reason"])
    )
    first = dominated[0]["reason"]  # 40 GPUs x $4.54, against the 24 of the 2nd cheapest met
    assert first.startswith("5 copies cost $181.60/hour") and "of them: $108.96/hour)" in first
    # ...but the PD slices keep their own top K: the verdict compares the best of each kind
    assert waves[1] == [80, 88]
    assert len(rows) == 6


def test_simulate_all_runs_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    waves = _fake_runs(monkeypatch, meets_from_gpus=8)
    cands = _cands("unit", [8, 16, 24, 32, 40, 48])
    rows, dominated = order.simulate_cheapest_first(
        cands, tiny(top=1, simulate_all=True), SerialBackend()
    )
    assert dominated == [] and len(rows) == 6 and sum(map(len, waves)) == 6


def test_without_a_price_candidates_rank_by_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_runs(monkeypatch, meets_from_gpus=8)
    cost, unit = order.cost_key(tiny(gpus=["h20"]))
    assert unit == "GPUs" and cost(_cands("unit", [16])[0]) == 16.0
    cost, unit = order.cost_key(tiny())
    assert unit == "$/hour" and cost(_cands("unit", [16])[0]) == pytest.approx(16 * 4.54)
