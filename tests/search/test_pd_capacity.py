"""PD capacity pool by pool: each pool searched alone meets its own condition at its maximum and
fails just above it (both checked by running again), units and GPUs for a target, the KV
transfer the prefill pool's TTFT budget leaves out, and the CLI's pool table and JSON block."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sim.catalog import load_gpu, load_model
from sim.cli import app
from sim.cost.memory import kv_bytes_per_token
from sim.metrics.results import DeploymentResults
from sim.run import run_scenario
from sim.search.backends import SerialBackend
from sim.search.capacity import capacity_search, search_count
from sim.search.capacity_report import CapacityReport
from sim.search.pd_capacity import PoolRule, mean_tokens, pool_rules
from sim.specs.deployment import Deployment
from sim.specs.scenario import Scenario
from sim.specs.workload import EmpiricalLength, FixedLength, LognormalLength, UniformLength
from tests.builders import TINY, tiny

# one node per pool; the decode pool holds at most 32 requests per rank, so it saturates
# at a different rate from the prefill pool
PD = {
    "name": "pd",
    "prefill": {"name": "p", "attn_tp": 1, "moe_ep": 8},
    "decode": {"name": "d", "attn_tp": 1, "moe_ep": 8, "max_running_requests": 32},
}
TARGET = 1000.0


def _pd(rate: float = 64.0, **pd: object) -> Scenario:
    return tiny(deployments=[PD | pd], workload=TINY["workload"] | {"rate_req_s": rate})


@pytest.fixture(scope="module")
def found() -> tuple[Scenario, CapacityReport]:
    sc = _pd()
    return sc, capacity_search(sc, TARGET, SerialBackend(), tolerance=0.1)


def _rules(sc: Scenario) -> dict[str, PoolRule]:
    return {r.pool: r for r in pool_rules(sc)}


def test_pool_scenarios_hold_that_pool_alone_with_its_role() -> None:
    sc = _pd()
    rules = _rules(sc)
    assert [r.label for r in pool_rules(sc)] == ["pd.prefill", "pd.decode"]
    for pool, rule in rules.items():
        probe = rule.scenario_at(5.0)
        (dep,) = probe.deployments
        assert isinstance(dep, Deployment)
        assert dep.name == f"pd_{pool}" and dep.role == pool
        written = getattr(sc.deployments[0], pool)
        assert dep.model_dump(exclude={"name", "role"}) == written.model_dump(
            exclude={"name", "role"}
        )
        assert probe.workload.rate_req_s == 5.0  # type: ignore[union-attr]
        assert probe.workload.input == sc.workload.input and probe.run == sc.run
        assert probe.slo == sc.slo and probe.expect == []
    assert rules["decode"].unit.max_running_requests == 32
    assert rules["prefill"].unit.max_running_requests == 256


def test_prefill_budget_is_the_ttft_target_less_a_typical_kv_transfer() -> None:
    sc = _pd(rate=4.0)
    rules = _rules(sc)
    model, gpu = load_model(sc.model), load_gpu(sc.gpu)
    per_token = kv_bytes_per_token(model, sc.deployments[0].prefill)  # type: ignore[union-attr]
    expected = 1000 * per_token / (gpu.nic_gb_s * 1e9)  # fixed 1000-token prompts
    assert rules["prefill"].kv_transfer_s == pytest.approx(expected, rel=1e-12)
    assert rules["prefill"].ttft_budget_s == pytest.approx(0.5 - expected, rel=1e-12)
    assert rules["decode"].ttft_budget_s == 0.5  # the decode pool's TTFT is not judged
    # the engine's own transfers, on a lightly loaded link, take what the rule says
    pair = run_scenario(sc).deployments[0]
    assert pair.kv_transfer_s_mean == pytest.approx(expected, rel=0.05)
    slow = _rules(_pd(rate=4.0, kv_transfer_gb_s=10.0))["prefill"]
    assert slow.kv_transfer_s == pytest.approx(1000 * per_token / 10e9, rel=1e-12)


def test_each_pool_meets_its_condition_at_its_max_and_fails_just_above(found: tuple) -> None:
    sc, report = found
    (pools,) = report.pd_pools
    rules = _rules(sc)
    for result, rule in ((pools.prefill, rules["prefill"]), (pools.decode, rules["decode"])):
        assert result.status == "converged" and result.deployment == rule.label
        lo, hi = result.max_rate_req_s, result.failing_rate_req_s
        assert lo is not None and hi is not None and lo < hi <= lo * 1.1
        at_max = run_scenario(rule.scenario_at(lo)).deployments[0]
        above = run_scenario(rule.scenario_at(hi)).deployments[0]
        assert rule.meets(at_max, lo) and not rule.meets(above, hi)
        assert result.probes[[p.rate_req_s for p in result.probes].index(lo)].meets_slo
    # the two pools saturate at different rates (the decode pool's 32 slots a rank bind first)
    assert pools.decode.max_rate_req_s > 1.5 * pools.prefill.max_rate_req_s  # type: ignore


def test_units_gpus_and_the_whole_pair_beside(found: tuple) -> None:
    sc, report = found
    (pools,) = report.pd_pools
    assert pools.deployment == "pd"
    for r in (pools.prefill, pools.decode):
        assert r.gpus_per_deployment == 8
        assert r.replicas == math.ceil(TARGET / r.max_rate_req_s)  # type: ignore[operator]
        assert r.gpus == r.replicas * 8  # type: ignore[operator]
    assert pools.gpus == pools.prefill.gpus + pools.decode.gpus  # type: ignore[operator]
    assert pools.prefill.replicas != pools.decode.replicas  # a ratio other than 1 : 1
    (pair,) = report.deployments
    assert pair.deployment == "pd" and pair.gpus_per_deployment == 16
    assert pair.gpus == math.ceil(TARGET / pair.max_rate_req_s) * 16  # type: ignore[operator]
    assert pools.gpus < pair.gpus  # type: ignore[operator]
    whole_only = capacity_search(sc, TARGET, SerialBackend(), tolerance=0.1, pd_pools=False)
    assert whole_only.deployments == report.deployments and whole_only.pd_pools == []
    assert search_count(sc) == 3 and search_count(sc, pd_pools=False) == 1


def test_colocated_only_scenario_is_unchanged() -> None:
    sc = tiny(deployments=[TINY["deployments"][1]], workload=TINY["workload"] | {"rate_req_s": 16})
    seen: list[str] = []
    report = capacity_search(
        sc, 50.0, SerialBackend(), max_runs=3, on_probe=lambda *a: seen.append(a[0])
    )
    assert report.pd_pools == [] and set(seen) == {"dp8_ep8"} and search_count(sc) == 1
    assert report == capacity_search(sc, 50.0, SerialBackend(), max_runs=3, pd_pools=False)


def test_decode_condition_is_tpot_rejections_and_backlog_not_ttft(found: tuple) -> None:
    sc, _ = found
    rule = _rules(sc)["decode"]
    d = run_scenario(rule.scenario_at(20.0)).deployments[0]
    assert rule.meets(d, 20.0)

    def changed(**kw: object) -> DeploymentResults:
        counts = {k: kw.pop(k) for k in ("queued", "rejected", "completed") if k in kw}
        return d.model_copy(update=kw | {"requests": d.requests.model_copy(update=counts)})

    assert rule.meets(changed(ttft_at_slo_s=5.0, slo_met=False), 20.0)  # TTFT is not its own
    assert not rule.meets(changed(tpot_at_slo_s=sc.slo.tpot_s * 1.02), 20.0)
    assert not rule.meets(changed(queued=11), 20.0)  # 11 > 20 req/s x 0.5 s
    assert not rule.meets(changed(rejected=1), 20.0)
    assert not rule.meets(changed(completed=0, tpot_at_slo_s=None), 20.0)
    pre = _rules(sc)["prefill"]
    p = run_scenario(pre.scenario_at(20.0)).deployments[0]
    assert pre.meets(p, 20.0)
    late = pre.ttft_budget_s + 0.5 * pre.kv_transfer_s  # within the SLO, not within the budget
    assert late < sc.slo.ttft_s and not pre.meets(
        p.model_copy(update={"ttft_at_slo_s": late}), 20.0
    )


def test_a_transfer_longer_than_the_ttft_target_is_reported_not_searched() -> None:
    sc = _pd(kv_transfer_gb_s=0.1)  # 1000 tokens x ~70 KB at 0.1 GB/s: ~0.7 s > 0.5 s
    seen: list[str] = []
    report = capacity_search(
        sc, TARGET, SerialBackend(), max_runs=2, on_probe=lambda *a: seen.append(a[0])
    )
    (pools,) = report.pd_pools
    assert pools.prefill_ttft_budget_s < 0 and pools.prefill.runs == 0
    assert pools.prefill.status == "fails_at_lowest" and pools.prefill.gpus is None
    assert "uses up the TTFT target" in pools.prefill.note and pools.gpus is None
    assert pools.decode.runs == 2 and "pd.prefill" not in seen and "pd.decode" in seen


def test_mean_prompt_tokens() -> None:
    assert mean_tokens(FixedLength(kind="fixed", tokens=700)) == 700.0
    assert mean_tokens(UniformLength(kind="uniform", min_tokens=100, max_tokens=301)) == 200.5
    emp = EmpiricalLength(kind="empirical", values=(100, 1000), weights=(3.0, 1.0))
    assert mean_tokens(emp) == 325.0
    free = LognormalLength(kind="lognormal", mean_tokens=2000, sigma=0.5)
    assert mean_tokens(free) == pytest.approx(2000, rel=0.01)
    capped = LognormalLength(kind="lognormal", mean_tokens=2000, sigma=1.0, max_tokens=2000)
    assert mean_tokens(capped) < 1600  # clipping the long tail lowers the mean


def test_cli_prints_the_pool_table_and_json_carries_both(tmp_path: Path) -> None:
    sc = tmp_path / "pd.yaml"
    data = TINY | {"deployments": [PD], "workload": TINY["workload"] | {"rate_req_s": 64.0}}
    sc.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "c.json"
    runner = CliRunner(env={"COLUMNS": "200"})
    args = ["capacity", str(sc), "--target-rate", "1000", "--tolerance", "0.1", "--backend",
            "serial"]  # fmt: skip
    res = runner.invoke(app, [*args, "--json", str(out)])
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    (pair,) = report["deployments"]
    (pools,) = report["pd_pools"]
    assert pair["deployment"] == "pd" and pair["gpus"] is not None
    a, b = pools["prefill"]["gpus"], pools["decode"]["gpus"]
    assert pools["gpus"] == a + b
    assert f"pd: prefill : decode GPUs = {a} : {b}; {a + b} GPUs in all" in res.output
    assert f"(whole pairs: {pair['gpus']})" in res.output
    for pool in ("prefill", "decode"):
        r = pools[pool]
        row = next(x for x in res.output.splitlines() if f" {pool} " in x and "converged" in x)
        assert f"{r['max_rate_req_s']:.4g}" in row and f" {r['replicas']} " in row
        assert f" {r['gpus']} " in row
    off = runner.invoke(app, [*args, "--no-pd-pools"])
    assert off.exit_code == 0 and "prefill : decode" not in off.output
