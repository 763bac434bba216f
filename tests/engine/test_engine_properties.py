"""Determinism and invariants under generated workloads and layouts."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.engine import simulate
from sim.specs import PoissonWorkload, RunSpec
from tests.builders import pd_pair, unit
from tests.engine.fixed_cost import FixedCost, requests, run_trace


def _poisson(rate: float) -> PoissonWorkload:
    return PoissonWorkload(
        kind="poisson",
        rate_req_s=rate,
        input={"kind": "uniform", "min_tokens": 1, "max_tokens": 3000},
        output={"kind": "lognormal", "mean_tokens": 80, "sigma": 1.0, "max_tokens": 600},
        prefix_cache_fraction=0.3,
    )


def _run(seed: int, mtp: int = 2) -> tuple[np.ndarray, ...]:
    dep = unit(ranks=4, mtp_draft_tokens=mtp, mtp_acceptance=(0.7,) * mtp if mtp else ())
    cost = FixedCost(step_s=0.01, prefill_token_s=2e-6, kv_token_s=1e-8, capacity_tokens=40_000)
    out = simulate(dep, lambda d: cost, _poisson(30.0), RunSpec(duration_s=20, seed=seed))
    t = out.table
    return t.arrival_s[: t.size], t.first_token_s[: t.size], t.finish_s[: t.size]


def test_same_seed_same_results_different_seed_differs() -> None:
    a, b, c = _run(3), _run(3), _run(4)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert a[0].shape != c[0].shape or not np.array_equal(a[0], c[0])


def test_workload_does_not_depend_on_the_layout() -> None:
    # MTP draws from the engine stream, not the workload stream: same arrivals either way
    np.testing.assert_array_equal(_run(5, mtp=0)[0], _run(5, mtp=3)[0])


rows = st.lists(
    st.tuples(st.floats(0.0, 2.0, allow_nan=False), st.integers(1, 600), st.integers(1, 120)),
    min_size=1,
    max_size=40,
)


@settings(max_examples=40, deadline=None)
@given(
    rows=rows,
    ranks=st.sampled_from([1, 2, 4]),
    capacity=st.integers(200, 4000),
    page=st.sampled_from([1, 16, 64]),
    max_running=st.integers(1, 8),
    chunk=st.sampled_from([64, 128, 1000]),
    mtp=st.integers(0, 3),
    router=st.sampled_from(["round_robin", "least_tokens", "least_kv"]),
    mixed=st.booleans(),
    reserve=st.sampled_from([0.0, 0.3, 1.0]),
)
def test_invariants_hold_and_every_request_ends(
    rows: list[tuple[float, int, int]],
    ranks: int,
    capacity: int,
    page: int,
    max_running: int,
    chunk: int,
    mtp: int,
    router: str,
    mixed: bool,
    reserve: float,
) -> None:
    dep = unit(
        ranks=ranks, page_size_tokens=page, max_running_requests=max_running,
        chunked_prefill_tokens=chunk, mtp_draft_tokens=mtp,
        mtp_acceptance=(0.6,) if mtp else (), router=router, mixed_chunk=mixed,
        decode_reserve_ratio=reserve,
    )  # fmt: skip
    cost = FixedCost(step_s=0.01, prefill_token_s=1e-5, kv_token_s=1e-7, capacity_tokens=capacity)
    out = run_trace(dep, cost, requests(*rows))  # simulate() checks the invariants itself
    c = out.counts
    assert c.arrived == len(rows)
    assert c.completed + c.rejected == c.arrived and c.running == c.queued == 0
    t = out.table
    done = t.phase[: t.size] == 4
    assert (t.generated[: t.size][done] == t.output_tokens[: t.size][done]).all()
    assert (t.first_token_s[: t.size][done] > t.arrival_s[: t.size][done]).all()
    if reserve == 1.0:  # every page a request will need is kept for it at admission
        assert int(t.preemptions[: t.size].sum()) == 0


@settings(max_examples=15, deadline=None)
@given(rows=rows, capacity=st.integers(700, 3000))
def test_pd_invariants(rows: list[tuple[float, int, int]], capacity: int) -> None:
    two = {"nodes": 1, "gpus_per_node": 2, "moe_ep": 2}
    pd = pd_pair(
        prefill={"page_size_tokens": 16, "chunked_prefill_tokens": 256},
        decode={"page_size_tokens": 16, "max_running_requests": 4},
        **two,
    )
    cost = FixedCost(step_s=0.01, prefill_token_s=1e-5, capacity_tokens=capacity)
    out = run_trace(pd, cost, requests(*rows))
    assert out.counts.completed + out.counts.rejected == len(rows)
