"""Hand-checkable timelines: fixed step costs give exact TTFT, TPOT and E2E."""

from __future__ import annotations

import numpy as np
import pytest

from sim.metrics import summarize
from sim.metrics.summary import _itl
from sim.specs import Slo
from tests.builders import pd_pair, unit
from tests.engine.fixed_cost import FixedCost, requests, run_trace


def test_one_rank_two_requests_exact_timeline() -> None:
    # step = 10 ms + 0.1 ms per prefill token
    cost = FixedCost(step_s=0.010, prefill_token_s=1e-4)
    out = run_trace(unit(), cost, requests((0.0, 100, 3), (0.015, 50, 2)))
    t = out.table
    # t=0: prefill r0 (100 tok) 20 ms -> first token 0.020
    # t=0.020: decode r0 + prefill r1 (50 tok) 15 ms -> r1 first token 0.035
    # t=0.035: decode r0, r1 10 ms -> both done at 0.045
    assert t.first_token_s[:2] == pytest.approx([0.020, 0.035])
    assert t.finish_s[:2] == pytest.approx([0.045, 0.045])
    assert list(t.generated[:2]) == [3, 2]
    assert out.end_s == pytest.approx(0.045)
    res = summarize(out.record, Slo(ttft_s=1.0, tpot_s=1.0))
    assert res.ttft_s.mean == pytest.approx(0.020)  # both wait exactly 20 ms
    assert res.tpot_s.p50 == pytest.approx((0.0125 + 0.010) / 2)  # r0: 25 ms / 2, r1: 10 ms / 1
    assert res.e2e_s.mean == pytest.approx((0.045 + 0.030) / 2)
    assert res.requests.completed == 2
    assert res.output_tok_s == pytest.approx(5 / 0.045)
    assert out.cluster.pools[0].log.n == 3


def test_chunked_prefill_splits_a_long_prompt() -> None:
    cost = FixedCost(step_s=0.010, prefill_token_s=0.0)
    out = run_trace(unit(chunked_prefill_tokens=64), cost, requests((0.0, 200, 1)))
    # 200 prompt tokens in chunks of 64: 4 steps, the first token after the 4th
    assert out.table.first_token_s[0] == pytest.approx(0.040)
    assert list(out.cluster.pools[0].log.column("prefill_tokens")) == [64, 64, 64, 8]


def test_idle_unit_sleeps_until_next_arrival() -> None:
    cost = FixedCost(step_s=0.010)
    out = run_trace(unit(), cost, requests((0.0, 10, 1), (5.0, 10, 1)))
    assert out.table.first_token_s[1] == pytest.approx(5.010)
    assert out.cluster.pools[0].log.n == 2  # no steps while idle
    assert out.events < 20


def test_pd_transfer_time_then_decode_pool() -> None:
    cost = FixedCost(step_s=0.010, prefill_token_s=1e-5, bytes_per_token=1000.0)
    one = {"nodes": 1, "gpus_per_node": 1}
    pd = pd_pair(**one)
    out = run_trace(pd, cost, requests((0.0, 1000, 3)), nic_gb_s=1.0)
    # prefill 10 + 10 ms -> first token sampled at 0.020; KV 1000 x 1000 B at 1 GB/s = 1 ms,
    # and the decode pool streams the token as its first step for it starts (0.021); then two
    # decode steps of 10 ms in the decode pool
    assert out.table.first_token_s[0] == pytest.approx(0.021)
    assert out.table.finish_s[0] == pytest.approx(0.041)
    assert out.cluster.transfer is not None and out.cluster.transfer.total_s == pytest.approx(1e-3)
    assert [p.log.n for p in out.cluster.pools] == [1, 2]


def test_pd_wait_for_a_decode_slot_counts_in_ttft() -> None:
    """The decode pool streams the first token when the request gets a slot: a full decode
    pool delays first tokens, not later ones."""
    cost = FixedCost(step_s=0.010, prefill_token_s=1e-5, bytes_per_token=1000.0)
    one = {"nodes": 1, "gpus_per_node": 1}
    pd = pd_pair(decode={"max_running_requests": 1}, **one)
    out = run_trace(pd, cost, requests((0.0, 1000, 3), (0.0, 1000, 3)), nic_gb_s=1.0)
    # one prefill step of 2000 tokens (0.030); the caches land at 0.031 and 0.032; the one
    # decode slot serves the first request (0.031-0.051), then the second (0.051-0.071)
    assert out.table.first_token_s[:2].tolist() == pytest.approx([0.031, 0.051])
    assert out.table.finish_s[:2].tolist() == pytest.approx([0.051, 0.071])


@pytest.mark.parametrize("mixed", [True, False])
def test_unmixed_prefill_holds_the_ranks_decode(mixed: bool) -> None:
    """A 3000-token prompt in three 1000-token chunks joins a rank that is decoding. Mixed, the
    decode request advances in those three steps; unmixed (SGLang's default), it waits, and
    finishes three 10 ms decode steps later."""
    cost = FixedCost(step_s=0.010, prefill_token_s=1e-5)
    dep = unit(mixed_chunk=mixed, chunked_prefill_tokens=1000)
    out = run_trace(dep, cost, requests((0.0, 100, 20), (0.05, 3000, 5)))
    t = out.table
    assert t.first_token_s[:2].tolist() == pytest.approx([0.011, 0.111])
    assert t.finish_s[0] == pytest.approx(0.231 if mixed else 0.261)
    assert list(t.generated[:2]) == [20, 5]
    # ITL: unmixed, one gap spans the three 20 ms chunk steps sat out and the 10 ms step after
    gaps, weights = _itl(out.record)
    long_gaps = weights[np.isclose(gaps, 0.070)].sum()
    assert long_gaps == (0 if mixed else 1)
    assert weights.sum() == 19 + 4  # every token after the first, once


def test_decode_role_requests_arrive_prefilled() -> None:
    cost = FixedCost(step_s=0.010, prefill_token_s=1.0)  # any prefill would take seconds
    out = run_trace(unit(role="decode"), cost, requests((0.0, 5000, 4)))
    assert out.table.first_token_s[0] == pytest.approx(0.010)
    assert out.table.finish_s[0] == pytest.approx(0.040)
    assert int(out.cluster.pools[0].log.column("prefill_tokens").sum()) == 0


def test_prefill_role_requests_end_at_first_token() -> None:
    cost = FixedCost(step_s=0.010, prefill_token_s=1e-5)
    out = run_trace(unit(role="prefill"), cost, requests((0.0, 1000, 50)))
    assert out.table.finish_s[0] == pytest.approx(0.020)
    assert out.table.generated[0] == 1


def test_lock_step_long_context_slows_every_rank() -> None:
    # decode only; per-rank attention = 1e-7 s per cached token; step = 10 ms + slowest rank
    cost = FixedCost(step_s=0.010, kv_token_s=1e-7)
    dep = unit(ranks=2, role="decode", router="round_robin")
    both = run_trace(dep, cost, requests((0.0, 100_000, 5), (0.0, 100, 5)))
    alone = run_trace(dep, cost, requests((0.0, 100, 5)))
    t = both.table
    assert both.cluster.pools[0].log.batch_per_rank[0].tolist() == [1, 1]
    # the short request on rank 1 waits for rank 0's ~10 ms of attention every step
    short_both = t.finish_s[1] - t.first_token_s[1]
    short_alone = alone.table.finish_s[0] - alone.table.first_token_s[0]
    assert short_both == pytest.approx(4 * (0.010 + 100_003 * 1e-7), rel=1e-3)
    assert short_alone == pytest.approx(4 * (0.010 + 103 * 1e-7), rel=1e-3)
    assert t.finish_s[0] == pytest.approx(t.finish_s[1])  # both ranks share every step
    imb = both.cluster.pools[0].log.column("imbalance")
    assert np.all(imb > 1.99)  # max/mean of (10 ms, ~0.01 ms)
