"""The planner on a tiny search: pruning counts, resumable runs, and its choice re-run alone."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from sim.io.journal import Journal
from sim.metrics.results import DeploymentResults
from sim.plan.planner import deployment_of, make_plan, pareto
from sim.plan.spec import PlanRequest
from sim.run import run_scenario
from sim.search.backends import SerialBackend
from sim.search.capacity import meets_slo
from sim.specs.deployment import PdDeployment
from sim.specs.scenario import Scenario
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
    """All its copies behind one router at the whole target rate, as one scenario."""
    plan, _ = plan_and_journal
    best, req = plan.best, plan.request
    dep = deployment_of(best)
    if isinstance(dep, PdDeployment):
        k = best["replicas"]
        pools = {p: getattr(dep, p) for p in ("prefill", "decode")}
        whole: Any = dep.model_copy(
            update={p: d.model_copy(update={"replicas": d.replicas * k}) for p, d in pools.items()}
        )
    else:
        whole = dep.model_copy(update={"replicas": best["replicas"]})
    life = req.lifetime_s
    sc = Scenario.model_validate({
        "name": "rerun", "model": req.model, "gpu": best["gpu"],
        "deployments": [whole.model_copy(update={"name": "best"}).model_dump(mode="json")],
        "workload": {"kind": "poisson", "rate_req_s": req.rate_req_s,
                     "input": req.input.model_dump(), "output": req.output.model_dump()},
        "slo": req.slo.model_dump(), "run": {"duration_s": 5 * life, "warmup_s": life, "seed": 7},
    })  # fmt: skip
    d: DeploymentResults = run_scenario(sc).deployments[0]
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
