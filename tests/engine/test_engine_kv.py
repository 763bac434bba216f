"""KV pages: admission waits for room, decode growth preempts the newest request (recompute)."""

from __future__ import annotations

import numpy as np
import pytest

from sim.engine.kv import KvPages
from sim.engine.requests import EngineError
from tests.builders import unit
from tests.engine.fixed_cost import FixedCost, requests, run_trace


def test_pages_round_up_and_include_state() -> None:
    kv = KvPages(2, capacity_tokens=1000, page_tokens=64, state_tokens=10)
    assert kv.capacity_pages == 15
    assert kv.pages_for(np.array([1, 54, 55, 118])).tolist() == [1, 1, 2, 2]


def test_taking_more_than_capacity_is_an_engine_error() -> None:
    kv = KvPages(1, capacity_tokens=64, page_tokens=16, state_tokens=0)
    kv.take(np.array([0]), np.array([4]))
    with pytest.raises(EngineError, match="above its capacity"):
        kv.take(np.array([0]), np.array([1]))


def test_admission_waits_until_kv_fits() -> None:
    # 18 pages of 16 tokens; each request needs 13 pages for its prompt: one at a time
    cost = FixedCost(step_s=0.010, prefill_token_s=1e-4, capacity_tokens=18 * 16)
    dep = unit(page_size_tokens=16)
    out = run_trace(dep, cost, requests((0.0, 200, 10), (0.0, 200, 10)))
    t = out.table
    assert t.first_token_s[0] == pytest.approx(0.030)  # 10 ms + 200 x 0.1 ms
    assert t.finish_s[0] == pytest.approx(0.030 + 9 * 0.010)
    # the second is admitted in the step that starts when the first finishes
    assert t.first_token_s[1] == pytest.approx(t.finish_s[0] + 0.030)
    assert out.cluster.pools[0].kv.peak_pages <= 18
    assert int(t.preemptions[:2].sum()) == 0


def test_decode_growth_preempts_newest_and_recomputes() -> None:
    # 20 pages of 16 tokens: two 150-token prompts (10 pages each) fill the cache; growing
    # past 160 tokens needs an 11th page, so the newer request is preempted and recomputed
    cost = FixedCost(step_s=0.010, prefill_token_s=0.0, capacity_tokens=20 * 16)
    dep = unit(page_size_tokens=16)
    out = run_trace(dep, cost, requests((0.0, 150, 30), (0.0, 150, 30)))
    t = out.table
    assert t.preemptions[0] == 0 and t.preemptions[1] >= 1
    assert list(t.generated[:2]) == [30, 30]  # both still finish, with all their tokens
    assert t.finish_s[0] < t.finish_s[1]
    # recompute covers the prompt plus the tokens it had generated before preemption
    assert t.prefill_target[1] > 150
    prefill = int(out.cluster.pools[0].log.column("prefill_tokens").sum())
    assert prefill == 150 + 150 + int(t.prefill_target[1])
    assert out.cluster.pools[0].kv.peak_pages <= 20
    assert out.cluster.pools[0].preempted == int(t.preemptions[1])


def test_reserving_decode_growth_admits_later_and_never_preempts() -> None:
    """The same two requests with admission keeping pages for all output still to come
    (decode_reserve_ratio 1): the second waits for the first to finish instead of being
    preempted and recomputed."""
    cost = FixedCost(step_s=0.010, prefill_token_s=0.0, capacity_tokens=20 * 16)
    dep = unit(page_size_tokens=16, decode_reserve_ratio=1.0)
    out = run_trace(dep, cost, requests((0.0, 150, 30), (0.0, 150, 30)))
    t = out.table
    assert int(t.preemptions[:2].sum()) == 0
    assert list(t.generated[:2]) == [30, 30]
    # 150 prompt + 30 output tokens = 12 pages each: the second is admitted once the first ends
    assert t.first_token_s[1] > t.finish_s[0]
    prefill = int(out.cluster.pools[0].log.column("prefill_tokens").sum())
    assert prefill == 300  # nothing recomputed


def test_request_that_can_never_fit_is_rejected() -> None:
    cost = FixedCost(step_s=0.010, capacity_tokens=1000)
    out = run_trace(unit(page_size_tokens=10), cost, requests((0.0, 900, 200), (0.0, 10, 2)))
    assert out.counts.rejected == 1 and out.counts.completed == 1


def test_max_running_requests_caps_the_batch() -> None:
    cost = FixedCost(step_s=0.010)
    batch = requests(*[(0.0, 10, 5)] * 5)
    out = run_trace(unit(max_running_requests=2), cost, batch)
    assert int(out.cluster.pools[0].log.batch_per_rank.max()) == 2
    assert out.counts.completed == 5
