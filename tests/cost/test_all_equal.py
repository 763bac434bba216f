"""`all_equal`: whether a step's column holds one value, at once for a broadcast column.

A decode-only step hands the cost model its verify widths as one value broadcast (stride 0,
`RunningSet.verify_width`), which `all_equal` sees as uniform without reading ~17k entries;
any other array is compared entry by entry, and a batch prices the same either way."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sim.catalog import load_gpu, load_model
from sim.cost.batch import BatchShape, StepCost, all_equal
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment
from tests.builders import unit
from tests.engine.fixed_cost import FixedCost, requests, run_trace


def test_all_equal_is_min_equals_max() -> None:
    rng = np.random.default_rng(5)
    for n in [1, 2, 3, 17, 1000]:
        for high in [1, 2, 9]:
            a = rng.integers(0, high, n)
            for view in (a, a[::2], a[::-1]):
                assert all_equal(view) == (view.min() == view.max())
    wide = np.broadcast_to(np.int64(2), (5,))
    assert wide.strides == (0,) and all_equal(wide)
    assert not all_equal(np.array([2, 2, 2, 3]))
    assert all_equal(np.array([7]))


def test_a_decode_step_prices_alike_with_broadcast_widths_or_an_array() -> None:
    d = Deployment(
        name="dp8", nodes=1, attn_tp=1, moe_ep=8, mtp_draft_tokens=1, mtp_acceptance=(0.8,)
    )
    rng = np.random.default_rng(8)
    for _ in range(10):
        n = int(rng.integers(8, 300))
        rank = rng.integers(0, 8, n)
        k = rng.integers(2, 9000, n)
        prices: list[StepCost] = []
        for q in (np.full(n, 2, dtype=np.int64), np.broadcast_to(np.int64(2), (n,))):
            cm = ServingCostModel(load_model("deepseek-v3"), load_gpu("h200"), d)
            batch = BatchShape(
                num_ranks=8, rank=rank, new_tokens=q, kv_tokens=k,
                is_decode=np.ones(n, dtype=bool),
            )  # fmt: skip
            prices.append(cm.step_cost(batch))
        plain, broadcast = prices
        assert broadcast.duration_s == plain.duration_s and broadcast.ops == plain.ops
        np.testing.assert_array_equal(broadcast.rank_own_s, plain.rank_own_s)


@dataclass
class Widths(FixedCost):
    """`FixedCost` that keeps the stride and values of each decode-only step's widths."""

    seen: list[tuple[int, set[int]]] = field(default_factory=list)

    def step_cost(self, batch: BatchShape) -> StepCost:
        if batch.size and np.count_nonzero(batch.is_decode) == batch.size:
            self.seen.append((batch.new_tokens.strides[0], set(batch.new_tokens.tolist())))
        return super().step_cost(batch)


def test_the_engine_hands_a_decode_step_its_widths_broadcast() -> None:
    rows = [(0.01 * i, 40 + 7 * i, 3 + i % 5) for i in range(30)]
    cost = Widths(prefill_token_s=1e-5, kv_token_s=1e-7)
    run_trace(
        unit(ranks=4, mtp_draft_tokens=2, mtp_acceptance=(0.8, 0.6)),
        cost,
        requests(*rows),
        duration_s=5.0,
    )
    assert cost.seen  # decode-only steps were met
    assert all(stride == 0 and values == {3} for stride, values in cost.seen)
