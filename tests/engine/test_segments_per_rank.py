"""The engine hands the cost model its own count of each rank's segments where the step runs
every running request, and that count is the one the batch's ranks give; the cost model prices
a batch alike with it or without it."""

from __future__ import annotations

import numpy as np

from sim.catalog import load_gpu, load_model
from sim.cost.batch import BatchShape, StepCost
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment
from tests.builders import unit
from tests.engine.fixed_cost import FixedCost, requests, run_trace


class Counting(FixedCost):
    """`FixedCost` that checks each batch's count per rank against its ranks."""

    counted: int = 0

    def step_cost(self, batch: BatchShape) -> StepCost:
        if batch.segments_per_rank is not None:
            want = np.bincount(batch.rank, minlength=batch.num_ranks)
            np.testing.assert_array_equal(batch.segments_per_rank, want)
            assert not batch.segments_per_rank.flags.writeable
            self.counted += 1
        return super().step_cost(batch)


def test_the_engine_count_per_rank_is_the_batch_count() -> None:
    rows = [(0.01 * i, 40 + 7 * i, 3 + i % 5) for i in range(40)]
    cost = Counting(prefill_token_s=1e-5, kv_token_s=1e-7)
    # without mixed chunks a rank that prefills runs nothing else: its decodes sit some steps out
    run_trace(unit(ranks=4, mixed_chunk=False), cost, requests(*rows), duration_s=5.0)
    assert 0 < cost.counted < cost.calls  # steps with and without the count were met


def test_a_batch_prices_alike_with_its_count_or_without() -> None:
    d = Deployment(name="dp8", nodes=1, attn_tp=1, moe_ep=8)
    cm = ServingCostModel(load_model("deepseek-v3"), load_gpu("h200"), d)
    rng = np.random.default_rng(2)
    for _ in range(20):
        n = int(rng.integers(1, 200))
        rank = rng.integers(0, 8, n)
        dec = rng.random(n) < 0.9
        q = np.where(dec, 1, rng.integers(1, 3000, n))
        k = q + rng.integers(0, 5000, n)
        args = dict(num_ranks=8, rank=rank, new_tokens=q, kv_tokens=k, is_decode=dec)
        plain = cm.step_cost(BatchShape(**args))
        counted = np.bincount(rank, minlength=8)
        given = cm.step_cost(BatchShape(**args, segments_per_rank=counted))
        assert given.duration_s == plain.duration_s and given.ops == plain.ops
        np.testing.assert_array_equal(given.rank_own_s, plain.rank_own_s)
