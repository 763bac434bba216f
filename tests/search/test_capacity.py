"""Capacity search: the maximum rate meets the SLO and the failing one just above it does not
(both checked by running the scenario again), GPUs for a target, and what cannot be searched."""

from __future__ import annotations

import math

import pytest

from sim.metrics.results import DeploymentResults
from sim.run import run_scenario
from sim.search.backends import ProcessBackend, SerialBackend
from sim.search.capacity import (
    CapacityError,
    _Search,
    capacity_search,
    meets_slo,
    probe_scenario,
)
from sim.search.capacity_report import Probe
from sim.specs.scenario import Scenario
from tests.builders import TINY, tiny

DP = TINY["deployments"][1]


def _one(rate: float = 20.0, **slo: float) -> Scenario:
    return tiny(
        deployments=[DP],
        workload=TINY["workload"] | {"rate_req_s": rate},
        slo=TINY["slo"] | slo,
    )


def _rerun(sc: Scenario, rate: float) -> DeploymentResults:
    return run_scenario(probe_scenario(sc, "dp8_ep8", rate)).deployments[0]


@pytest.fixture(scope="module")
def found() -> tuple[Scenario, object]:
    sc = _one()
    return sc, capacity_search(sc, 100.0, SerialBackend(), tolerance=0.05)


def test_max_rate_meets_the_slo_and_the_rate_just_above_fails(found: tuple) -> None:
    sc, report = found
    (d,) = report.deployments
    assert d.status == "converged" and d.deployment == "dp8_ep8"
    lo, hi = d.max_rate_req_s, d.failing_rate_req_s
    assert lo < hi <= lo * 1.05
    at_max, above = _rerun(sc, lo), _rerun(sc, hi)
    assert meets_slo(at_max, lo, sc.slo) and not meets_slo(above, hi, sc.slo)
    assert at_max.ttft_s.p90 == d.ttft_s <= sc.slo.ttft_s
    assert at_max.tpot_s.p90 == d.tpot_s <= sc.slo.tpot_s
    assert at_max.output_tok_s_per_gpu == d.output_tok_s_per_gpu
    assert d.runs == len(d.probes) <= 20
    assert [p.rate_req_s for p in d.probes] == sorted(p.rate_req_s for p in d.probes)


def test_gpus_for_the_target(found: tuple) -> None:
    _, report = found
    (d,) = report.deployments
    assert d.gpus_per_deployment == 8
    assert d.replicas == math.ceil(100.0 / d.max_rate_req_s)
    assert d.gpus == d.replicas * 8
    small = capacity_search(_one(), 5.0, SerialBackend()).deployments[0]
    assert small.replicas == 1 and small.gpus == 8
    assert small.max_rate_req_s == d.max_rate_req_s  # the target does not change the search


def test_same_answer_in_a_process_pool(found: tuple) -> None:
    sc, report = found
    with ProcessBackend(jobs=2) as pool:
        assert capacity_search(sc, 100.0, pool, tolerance=0.05) == report


def test_impossible_slo_is_reported_not_zero() -> None:
    seen: list[tuple[str, float, bool]] = []
    report = capacity_search(
        _one(ttft_s=1e-4), 10.0, SerialBackend(), max_runs=3, on_probe=lambda *a: seen.append(a)
    )
    (d,) = report.deployments
    assert d.status == "fails_at_lowest" and d.runs == 3
    assert d.max_rate_req_s is None and d.replicas is None and d.gpus is None
    assert [r for _, r, _ in seen] == [20.0, 10.0, 5.0] and not any(ok for *_, ok in seen)
    assert "misses the SLO at every rate probed, down to 5 req/s" in d.note


def test_no_failure_within_max_runs_is_a_lower_bound() -> None:
    (d,) = capacity_search(_one(rate=2.0), 10.0, SerialBackend(), max_runs=2).deployments
    assert d.status == "no_failure" and d.max_rate_req_s == 4.0 and d.failing_rate_req_s is None
    assert "at least" in d.note and d.replicas == 3


def test_bracket_stays_on_the_safe_side_of_a_non_monotone_run() -> None:
    s = _Search("x", start=10.0, floor=0.0)
    for rate, ok in ((10.0, True), (20.0, False), (14.0, False), (17.0, True)):
        s.probes[rate] = Probe(
            rate_req_s=rate, meets_slo=ok, slo_met=ok, ttft_s=None, tpot_s=None,
            output_tok_s_per_gpu=0.0, goodput_req_s=0.0, queued=0, rejected=0,
        )  # fmt: skip
    assert s.bracket() == (10.0, 14.0)  # 17 met, but 14 below it did not
    assert s.next_rates(1, 0.05, 5) == [pytest.approx(math.sqrt(140.0))]
    assert s.next_rates(3, 0.05, 2) == [pytest.approx(10 * 1.4**0.25), pytest.approx(10 * 1.4**0.5)]
    assert s.next_rates(1, 0.5, 5) == []  # 14 / 10 is within 50 %


def test_backlog_counts_against_the_slo() -> None:
    sc = _one()
    d = _rerun(sc, 10.0)
    assert meets_slo(d, 10.0, sc.slo)
    stuck = d.model_copy(update={"requests": d.requests.model_copy(update={"queued": 6})})
    assert not meets_slo(stuck, 10.0, sc.slo)  # 6 waiting > 10 req/s x 0.5 s
    lost = d.model_copy(update={"requests": d.requests.model_copy(update={"rejected": 1})})
    assert not meets_slo(lost, 10.0, sc.slo)


def test_closed_loop_trace_and_bad_options_are_refused() -> None:
    closed = TINY["workload"] | {"kind": "closed", "concurrency": 8}
    closed.pop("rate_req_s")
    with pytest.raises(CapacityError, match=r"workload.kind='closed'.*poisson or gamma"):
        capacity_search(tiny(workload=closed), 10.0, SerialBackend())
    with pytest.raises(CapacityError, match="'trace'"):
        capacity_search(tiny(workload={"kind": "trace", "path": "t.csv"}), 10.0, SerialBackend())
    for kw, match in (({"tolerance": 0.0}, "tolerance"), ({"max_runs": 1}, "max runs")):
        with pytest.raises(CapacityError, match=match):
            capacity_search(_one(), 10.0, SerialBackend(), **kw)  # type: ignore[arg-type]
    with pytest.raises(CapacityError, match="target rate"):
        capacity_search(_one(), 0.0, SerialBackend())


def test_latencies_are_reported_at_any_slo_percentile() -> None:
    """The results carry TTFT/TPOT at the SLO's own percentile (95 here, not one of p50/p90/p99),
    between their p90 and p99, and the capacity report shows them."""
    sc = _one(rate=4.0, percentile=95.0)
    d = run_scenario(sc).deployments[0]
    assert d.ttft_at_slo_s is not None and d.tpot_at_slo_s is not None
    assert d.ttft_s.p90 <= d.ttft_at_slo_s <= d.ttft_s.p99  # type: ignore[operator]
    assert d.tpot_s.p90 <= d.tpot_at_slo_s <= d.tpot_s.p99  # type: ignore[operator]
    report = capacity_search(sc, 10.0, SerialBackend(), max_runs=2)
    probe = report.deployments[0].probes[0]
    assert probe.rate_req_s == 4.0 and probe.ttft_s == d.ttft_at_slo_s


def test_a_probe_whose_requests_mostly_did_not_finish_is_flagged() -> None:
    from sim.search.capacity import thin_evidence

    base = dict(meets_slo=True, slo_met=True, ttft_s=0.2, tpot_s=0.05, output_tok_s_per_gpu=1.0)
    base |= dict(goodput_req_s=1.0, queued=0, rejected=0, rate_req_s=5.0)
    thin = Probe(**base, arrived=276, completed=33)
    note = thin_evidence(thin)
    assert note is not None and "only 33 of 276 requests finished" in note
    assert thin_evidence(Probe(**base, arrived=276, completed=200)) is None
    assert thin_evidence(Probe(**base)) is None  # reports from before the counts were kept


def test_probes_record_their_request_counts(found: tuple) -> None:
    _, report = found
    probes = report.deployments[0].probes
    assert all(0 <= p.completed <= p.arrived and p.arrived > 0 for p in probes)
    assert any(p.completed > 0 for p in probes if p.meets_slo)


def test_a_deployment_that_does_not_fit_is_a_row_and_the_others_go_on() -> None:
    tight = TINY["deployments"][0] | {"mem_fraction": 0.3}
    sc = tiny(deployments=[tight, DP])
    report = capacity_search(sc, 10.0, SerialBackend(), max_runs=3)
    bad, good = report.deployments
    assert bad.status == "error" and bad.runs == 0 and bad.gpus is None
    assert bad.note.startswith("the probe at 4 req/s failed: deployment 'tp8' does not fit")
    assert good.status != "error" and good.runs == 3 and good.max_rate_req_s is not None


def test_a_near_miss_at_the_lowest_rate_is_warned() -> None:
    base = _rerun(_one(), 1.0)
    ttft = base.ttft_at_slo_s
    assert ttft is not None
    near = capacity_search(_one(rate=1.0, ttft_s=ttft / 0.95), 5.0, SerialBackend(), max_runs=2)
    (d,) = near.deployments
    assert d.probes[0].rate_req_s == 1.0 and d.probes[0].meets_slo
    (warning,) = d.warnings
    assert warning.startswith("near miss: at the lowest rate probed (1 req/s) TTFT p90")
    assert "95% of its" in warning
    far = capacity_search(_one(rate=1.0, ttft_s=ttft * 2), 5.0, SerialBackend(), max_runs=2)
    assert far.deployments[0].warnings == []
    over = capacity_search(_one(rate=1.0, ttft_s=ttft / 1.05), 5.0, SerialBackend(), max_runs=2)
    (d,) = over.deployments
    assert not d.probes[0].meets_slo and d.status == "fails_at_lowest"
    assert any("missed by a small margin" in w for w in d.warnings)
