"""TensorRT-LLM's one token budget: a step's generation tokens come out of max_num_tokens
before its context chunks; SGLang and vLLM budget prefill tokens alone."""

from __future__ import annotations

import numpy as np
import pytest

from tests.builders import unit
from tests.engine.fixed_cost import FixedCost, requests, run_trace


@pytest.mark.parametrize(
    ("engine", "chunks"),
    [
        (None, [10, 64, 64, 64, 8]),
        ("sglang", [10, 64, 64, 64, 8]),
        ("trtllm", [10, 63, 63, 63, 11]),
    ],
)
def test_decode_tokens_share_the_trtllm_budget(engine: str | None, chunks: list[int]) -> None:
    # r0 (10-token prompt) decodes from step 2 on; r1's 200-token prompt arrives in step 1.
    # With a 64-token budget, TRT-LLM gives r1 64 - 1 tokens per step while r0 decodes.
    dep = unit(engine=engine, chunked_prefill_tokens=64)
    out = run_trace(dep, FixedCost(step_s=0.010), requests((0.0, 10, 10), (0.005, 200, 1)))
    # the remaining steps decode r0 alone
    assert list(out.cluster.pools[0].log.column("prefill_tokens")) == [*chunks, 0, 0, 0, 0, 0]


def test_continuing_prefill_chunks_fill_each_rank_oldest_first() -> None:
    """The vectorised chunks equal a request-by-request fill of each rank's budget."""
    from types import SimpleNamespace

    from sim.engine.running import RunningSet
    from sim.engine.scheduler import RankBudget, _continue_prefill

    rng = np.random.default_rng(3)
    for _ in range(20):
        R, n = int(rng.integers(1, 6)), int(rng.integers(1, 40))
        table = SimpleNamespace(prefill_target=rng.integers(1, 900, n), prefilled=np.zeros(n, int))
        table.prefilled = rng.integers(0, table.prefill_target)
        rs = RunningSet(R)
        ids = rng.permutation(n)
        rs._buf[0, :n], rs._buf[1, :n], rs.n = ids, rng.integers(0, R, n), n
        budget0 = rng.integers(0, 1500, R)
        budget = RankBudget(np.zeros(R, int), np.zeros(R, int), budget0.copy())
        pos, chunks = _continue_prefill(SimpleNamespace(table=table), rs, budget)  # type: ignore[arg-type]
        left = budget0.copy()
        want = []
        for p in pos.tolist():  # oldest (lowest id) first, each rank on its own
            i, r = rs.ids[p], rs.rank[p]
            c = min(int(table.prefill_target[i] - table.prefilled[i]), int(left[r]))
            left[r] -= c
            want.append(c)
        assert sorted(rs.ids[pos].tolist()) == rs.ids[pos].tolist()
        assert chunks.tolist() == want
        assert budget.prefill_tokens.tolist() == left.tolist()


def test_trtllm_runs_prompts_whole_and_stops_at_the_first_that_does_not_fit() -> None:
    # TensorRT-LLM without context chunking: in a 100-token budget r1 (60) joins whole in
    # step 1; r2 (60) does not fit the 40 left and waits, and r3 (10) behind it waits too
    # (FIFO stops at r2). Step 2: r1 decodes (1 token), r2 and r3 fit the 99 left.
    dep = unit(engine="trtllm", chunked_prefill_tokens=100, chunked_prefill=False)
    out = run_trace(
        dep, FixedCost(step_s=0.010), requests((0.0, 60, 3), (0.0, 60, 1), (0.0, 10, 1))
    )
    prefill = list(out.cluster.pools[0].log.column("prefill_tokens"))
    assert prefill[:2] == [60, 70]
    assert sum(prefill) == 130  # no prompt was split


def test_chunked_prefill_on_splits_the_prompt_that_does_not_fit() -> None:
    dep = unit(engine="trtllm", chunked_prefill_tokens=100)  # chunked prefill: the default
    out = run_trace(
        dep, FixedCost(step_s=0.010), requests((0.0, 60, 3), (0.0, 60, 1), (0.0, 10, 1))
    )
    # r1 60 + r2 40 in step 1; r2's last 20 and r3's 10 with r1's decode in step 2
    assert list(out.cluster.pools[0].log.column("prefill_tokens"))[:2] == [100, 30]


def test_a_prompt_longer_than_the_unchunked_budget_is_refused() -> None:
    dep = unit(engine="trtllm", chunked_prefill_tokens=100, chunked_prefill=False)
    out = run_trace(dep, FixedCost(step_s=0.010), requests((0.0, 150, 2), (0.0, 50, 2)))
    pool = out.cluster.pools[0]
    assert pool.rejected == 1 and pool.completed == 1
