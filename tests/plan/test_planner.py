"""The planner on a tiny search: pruning counts, resumable runs, and its choice re-run alone."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from sim.io.journal import Journal
from sim.metrics.results import DeploymentResults
from sim.plan.planner import make_plan, pareto
from sim.plan.scenario_out import plan_scenario
from sim.plan.spec import PlanRequest
from sim.run import run_scenario
from sim.search.backends import SerialBackend
from sim.search.capacity import meets_slo
from sim.specs.scenario import Scenario
from tests import builders
from tests.plan.plan_helpers import TINY_SPACE, tiny


@pytest.fixture(scope="module")
def plan_and_journal(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    path = tmp_path_factory.mktemp("plan") / "journal.jsonl"
    with SerialBackend() as b:
        return make_plan(tiny(), b, Journal(path)), path


def test_a_tiny_plan_ranks_what_meets_the_slo(plan_and_journal: tuple[Any, Path]) -> None:
    plan, _ = plan_and_journal
    assert plan.simulated == len(plan.rows) >= 2
    assert plan.top, "a DeepSeek-V3 TP8 node serves 6 req/s of 1000/100-token requests"
    assert all(r["slo_met"] for r in plan.top)
    best = plan.best
    assert best["usd_per_hour"] == pytest.approx(best["gpus"] * 4.54)
    assert best["usd_per_m_tokens"] == pytest.approx(
        best["usd_per_hour"] / (best["output_tok_s"] * 3600) * 1e6
    )
    assert {"sglang", "vllm"} == set(best["launch"])
    front = pareto(plan.rows)
    assert front and all(r in plan.rows for r in front)


def test_the_top_candidate_rerun_alone_meets_the_slo(plan_and_journal: tuple[Any, Path]) -> None:
    """All its copies behind one router at the whole target rate, as the plan's scenario file
    holds it."""
    plan, _ = plan_and_journal
    best, req = plan.best, plan.request
    data = plan_scenario(plan)
    assert data is not None and data["gpu"] == best["gpu"]
    assert len(data["deployments"]) == len(plan.top)
    first = data["deployments"][0]
    assert first["name"].startswith("top1_")
    assert data["workload"]["rate_req_s"] == req.rate_req_s
    sc = Scenario.model_validate({**data, "deployments": data["deployments"][:1]})
    d: DeploymentResults = run_scenario(sc).deployments[0]
    assert d.gpus == best["gpus"]  # every copy of the plan's choice
    assert meets_slo(d, float(req.rate_req_s or 0), req.slo), (d.ttft_at_slo_s, d.tpot_at_slo_s)


class _NoRuns(SerialBackend):
    def run(self, scenarios: Sequence[Scenario], progress: Any = None) -> Iterator[Any]:
        if scenarios:
            raise AssertionError(f"{len(scenarios)} candidates simulated again")
        return iter(())


def test_a_rerun_reads_finished_candidates_from_the_journal(
    plan_and_journal: tuple[Any, Path],
) -> None:
    plan, path = plan_and_journal
    again = make_plan(tiny(), _NoRuns(), Journal(path))
    assert [r["id"] for r in again.rows] == [r["id"] for r in plan.rows]


def test_pruning_counts_each_rule() -> None:
    """attn_tp 3 cannot split 8 GPUs; DeepSeek-V3 on one 8 x H100 node does not fit; a 1 ms
    TPOT target is below any layout's floor."""
    space = {**TINY_SPACE, "attn_tp": [3, 8]}
    with _NoRuns() as b:
        h100 = make_plan(tiny(gpus=["h100"], space=space), b)
        assert h100.removed["layout"] == 2 and h100.removed["memory"] == 2, h100.pruned
        fast = make_plan(tiny(slo={"ttft_s": 2.0, "tpot_s": 0.001}), b)
    assert fast.removed["latency floor"] == 2 and not fast.rows
    assert "no candidate met" in fast.verdict


def test_a_request_needs_exactly_one_load_target() -> None:
    with pytest.raises(ValueError, match="exactly one load target"):
        PlanRequest.model_validate({**tiny().model_dump(), "users": 10})


def test_a_layout_just_over_memory_is_pruned_as_a_near_miss() -> None:
    """DeepSeek-V3 TP8 on one H200 node with a 2^19-token chunk needs ~91% of HBM (one chunk's
    KV on every GPU): over the 0.9 it is tried at, within reach of mem_fraction 0.92."""
    from sim.catalog import load_gpu, load_model
    from sim.plan.prune import memory_need

    space = {**TINY_SPACE, "chunked_prefill_tokens": [2**19, 2**21]}
    with _NoRuns() as b:
        plan = make_plan(tiny(space=space), b)
    near, far = sorted(plan.pruned, key=lambda r: r["layout"])[::-1]  # c524288 sorts after c2097152
    assert near["rule"] == far["rule"] == "memory"
    assert near["reason"].startswith(
        "near miss: needs 91% of HBM, within reach of mem_fraction 0.92"
    )
    assert "does not fit" in near["reason"] and not far["reason"].startswith("near miss")
    model, gpu = load_model("deepseek-v3"), load_gpu("h200")
    from sim.plan.space import layouts

    needs = sorted(
        memory_need(lay, model, gpu) or 0 for lay in layouts(tiny(space=space), model, gpu)
    )
    assert 0.9 < needs[0] <= 0.95 < needs[1]


def test_a_narrow_slo_miss_is_a_near_miss() -> None:
    from sim.plan.run import _near_miss

    sc = builders.tiny(
        name="t", deployments=[{"name": "d", "attn_tp": 8, "moe_tp": 8}],
        workload=builders.poisson(2.0, 500, 20),
        slo={"ttft_s": 2.0, "tpot_s": 0.1}, run={"duration_s": 6.0, "warmup_s": 1.0},
    )  # fmt: skip
    d = run_scenario(sc).deployments[0]
    assert d.ttft_at_slo_s is not None and d.tpot_at_slo_s is not None
    slo = {"ttft_s": d.ttft_at_slo_s / 1.05, "tpot_s": d.tpot_at_slo_s * 2, "percentile": 90}
    assert _near_miss(d, tiny(slo=slo))
    assert not _near_miss(d, tiny(slo={**slo, "ttft_s": d.ttft_at_slo_s / 1.2}))
