"""Workload generation: arrival processes, length distributions, prefix hits, closed loop."""

from __future__ import annotations

import numpy as np
import pytest

from sim.engine import simulate
from sim.engine.arrivals import WorkloadRefused, open_loop
from sim.engine.lengths import sample_lengths
from sim.specs import (
    ClosedWorkload,
    EmpiricalLength,
    GammaWorkload,
    LognormalLength,
    PoissonWorkload,
    RunSpec,
    UniformLength,
)
from tests.builders import unit
from tests.engine.fixed_cost import FixedCost

FIX = {"kind": "fixed", "tokens": 100}


def test_poisson_rate_and_gamma_burstiness() -> None:
    rng = np.random.default_rng(1)
    p = open_loop(PoissonWorkload(kind="poisson", rate_req_s=50, input=FIX, output=FIX),
                  rng, 400.0, None)  # fmt: skip
    assert p.arrival_s.shape[0] == pytest.approx(20_000, rel=0.03)
    assert p.arrival_s.max() < 400.0 and (np.diff(p.arrival_s) >= 0).all()
    g = open_loop(GammaWorkload(kind="gamma", rate_req_s=50, cv=3.0, input=FIX, output=FIX),
                  rng, 2000.0, None)  # fmt: skip
    gaps = np.diff(g.arrival_s)
    assert gaps.mean() == pytest.approx(1 / 50, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(3.0, rel=0.1)


def test_max_requests_caps_open_loop() -> None:
    w = PoissonWorkload(kind="poisson", rate_req_s=5, input=FIX, output=FIX)
    assert open_loop(w, np.random.default_rng(0), None, 123).arrival_s.shape[0] == 123


def test_length_distributions() -> None:
    rng = np.random.default_rng(2)
    u = sample_lengths(UniformLength(kind="uniform", min_tokens=5, max_tokens=9), rng, 10_000)
    assert u.min() == 5 and u.max() == 9
    ln = LognormalLength(kind="lognormal", mean_tokens=1000, sigma=0.5)
    assert sample_lengths(ln, rng, 200_000).mean() == pytest.approx(1000, rel=0.01)
    e = EmpiricalLength(kind="empirical", values=(10, 20), weights=(3, 1))
    assert (sample_lengths(e, rng, 40_000) == 10).mean() == pytest.approx(0.75, abs=0.01)


def test_prefix_cache_fraction_and_cap() -> None:
    w = PoissonWorkload(
        kind="poisson", rate_req_s=100, input={"kind": "uniform", "min_tokens": 1,
        "max_tokens": 400}, output=FIX, prefix_cache_tokens={"kind": "fixed", "tokens": 300},
    )  # fmt: skip
    b = open_loop(w, np.random.default_rng(0), 10.0, None)
    assert (b.cached_tokens <= np.maximum(b.input_tokens - 1, 0)).all()
    assert (b.cached_tokens == np.minimum(300, b.input_tokens - 1)).all()
    f = PoissonWorkload(kind="poisson", rate_req_s=100, input=FIX, output=FIX,
                        prefix_cache_fraction=0.25)  # fmt: skip
    assert (open_loop(f, np.random.default_rng(0), 1.0, None).cached_tokens == 25).all()


def test_prefix_hits_skip_prefill_work() -> None:
    w = PoissonWorkload(kind="poisson", rate_req_s=20, input=FIX, output={"kind": "fixed",
                        "tokens": 2}, prefix_cache_fraction=0.5)  # fmt: skip
    out = simulate(unit(), lambda d: FixedCost(), w, RunSpec(max_requests=50))
    assert int(out.cluster.pools[0].log.column("prefill_tokens").sum()) == 50 * 50


@pytest.mark.parametrize("per_rank", [True, False])
def test_closed_loop_keeps_concurrency(per_rank: bool) -> None:
    kw = {"concurrency_per_rank": 3} if per_rank else {"concurrency": 12}
    w = ClosedWorkload(kind="closed", input=FIX, output={"kind": "uniform", "min_tokens": 5,
                       "max_tokens": 50}, **kw)  # fmt: skip
    out = simulate(unit(ranks=4), lambda d: FixedCost(), w, RunSpec(duration_s=5.0))
    c = out.counts
    assert c.running + c.queued == 12
    assert c.arrived == c.completed + 12
    if per_rank:  # replacements stay on their rank: the per-rank batch never drifts
        assert (out.cluster.pools[0].log.batch_per_rank[5:] == 3).all()


def test_closed_loop_ramp_spreads_the_first_requests() -> None:
    """ramp_s: the 12 first requests arrive 0.5 s apart instead of all at 0; replacements join
    in time order among the ramp arrivals still due, and concurrency still holds."""
    w = ClosedWorkload(kind="closed", concurrency=12, input=FIX, output={"kind": "fixed",
                       "tokens": 5}, ramp_s=6.0)  # fmt: skip
    out = simulate(unit(ranks=4), lambda d: FixedCost(), w, RunSpec(duration_s=10.0))
    arrivals = out.table.arrival_s[: out.table.size]
    for i in range(12):  # each user's first request, at its point of the ramp
        assert np.isclose(arrivals, 0.5 * i).any()
    assert (arrivals < 0.5).sum() > 1  # the first user's replacements come in meanwhile
    assert (np.diff(arrivals) >= 0).all()  # the table stays in arrival order
    assert out.counts.arrived > 12 and out.counts.running + out.counts.queued == 12


def test_closed_loop_respects_max_requests() -> None:
    w = ClosedWorkload(kind="closed", concurrency=4, input=FIX, output=FIX)
    out = simulate(unit(), lambda d: FixedCost(), w, RunSpec(max_requests=10))
    assert out.counts.arrived == 10 and out.counts.completed == 10


@pytest.mark.parametrize("per_rank", [True, False])
def test_closed_loop_replaces_refused_requests(per_rank: bool) -> None:
    """Prompts of 10-100 tokens on ranks that hold 64: the longer ones can never fit and are
    refused; their users send the next request at once, so concurrency still holds."""
    kw = {"concurrency_per_rank": 3} if per_rank else {"concurrency": 12}
    w = ClosedWorkload(kind="closed", input={"kind": "uniform", "min_tokens": 10,
                       "max_tokens": 100}, output={"kind": "fixed", "tokens": 4}, **kw)  # fmt: skip
    cost = FixedCost(capacity_tokens=64)
    out = simulate(unit(ranks=4, page_size_tokens=1), lambda d: cost, w, RunSpec(duration_s=5.0))
    c = out.counts
    assert c.rejected > 100 and c.completed > 100
    assert c.running + c.queued == 12
    assert c.arrived == c.completed + c.rejected + 12
    if per_rank:  # a refused request's replacement is pinned to its rank too
        assert out.cluster.pools[0].assigned.tolist() == [3, 3, 3, 3]


def test_refusals_in_a_row_restart_after_an_admitted_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One user, about 60% of whose prompts fit: deliveries of one request are either admitted
    or refused, never mixed, and an admitted one must still end the run of refusals."""
    monkeypatch.setattr("sim.engine.arrivals.MAX_REFUSALS", 20)
    w = ClosedWorkload(kind="closed", concurrency=1, input={"kind": "uniform", "min_tokens": 10,
                       "max_tokens": 100}, output={"kind": "fixed", "tokens": 4})  # fmt: skip
    cost = FixedCost(capacity_tokens=64)
    out = simulate(unit(page_size_tokens=1), lambda d: cost, w, RunSpec(duration_s=5.0))
    assert out.counts.rejected > 100 and out.counts.completed > 100


def test_closed_loop_whose_every_request_is_refused_stops_with_a_clear_error() -> None:
    w = ClosedWorkload(kind="closed", concurrency=8, input={"kind": "fixed", "tokens": 500},
                       output=FIX)  # fmt: skip
    cost = FixedCost(capacity_tokens=64)
    with pytest.raises(WorkloadRefused, match="10,000 requests in a row were refused"):
        simulate(unit(page_size_tokens=1), lambda d: cost, w, RunSpec(duration_s=5.0))
