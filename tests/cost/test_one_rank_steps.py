"""A one-rank unit's decode steps (the tensor-parallel layouts) are priced whole, memoised by
their rank's shape: each must cost what pricing the step itself gives, whichever step of the
same shape was priced first."""

from __future__ import annotations

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.batch import BatchShape, StepCost
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment


def decode_step(kv: np.ndarray, width: int) -> BatchShape:
    n = kv.shape[0]
    return BatchShape(
        num_ranks=1,
        rank=np.zeros(n, dtype=np.int64),
        new_tokens=np.full(n, width, dtype=np.int64),
        kv_tokens=kv,
        is_decode=np.ones(n, dtype=bool),
    )


def same(a: StepCost, b: StepCost) -> None:
    assert a.duration_s == b.duration_s
    assert a.overlap_saved_s == b.overlap_saved_s
    assert a.rank_own_s.tolist() == b.rank_own_s.tolist()
    assert {k: v.seconds for k, v in a.ops.items()} == {k: v.seconds for k, v in b.ops.items()}


@pytest.mark.parametrize(
    ("model", "engine", "mtp"),
    [("deepseek-v3", "sglang", 0), ("deepseek-v3", "trtllm", 1), ("deepseek-v3.2", "sglang", 1)],
)
def test_a_memoised_one_rank_step_costs_what_pricing_it_gives(
    model: str, engine: str, mtp: int
) -> None:
    d = Deployment(
        name="tp8", attn_tp=8, moe_tp=8, engine=engine, mtp_draft_tokens=mtp,
        mtp_acceptance=(0.8,) * mtp,
    )  # fmt: skip
    args = (load_model(model), load_gpu("h200"), d, load_profile("h200-roofline"))
    cost = ServingCostModel(*args)
    rng = np.random.default_rng(8)
    hits = 0
    for _ in range(40):
        n = int(rng.integers(1, 5))
        # about one context sum whatever the requests: steps of one shape recur, and steps of
        # other request counts share its context-sum bucket
        kv = rng.integers(12_000, 12_040, n) // n
        step = decode_step(kv, 1 + mtp)
        key = cost._one_rank.key(step)
        assert key is not None
        hits += key in cost._one_rank
        same(cost.step_cost(step), ServingCostModel(*args)._step_cost(step))
    assert hits > 20  # most steps were answered from the memo


@pytest.mark.parametrize("mtp", [0, 1])
def test_a_memoised_one_rank_step_with_a_chunk_costs_what_pricing_it_gives(mtp: int) -> None:
    """Steps with a prompt chunk are memoised by their `MixedShape` (a fixed-length prompt's
    chunks recur): each costs what pricing it gives."""
    d = Deployment(
        name="tp8", attn_tp=8, moe_tp=8, mtp_draft_tokens=mtp, mtp_acceptance=(0.8,) * mtp
    )
    args = (load_model("deepseek-v3"), load_gpu("h200"), d, load_profile("h200-roofline"))
    cost = ServingCostModel(*args)
    rng = np.random.default_rng(2)
    hits = 0
    for _ in range(30):
        n = int(rng.integers(0, 4))
        kv = rng.integers(12_000, 12_040, n) // max(n, 1)
        step = BatchShape(
            num_ranks=1,
            rank=np.zeros(n + 1, dtype=np.int64),
            new_tokens=np.append(np.full(n, 1 + mtp), 2000),
            kv_tokens=np.append(kv, 2000),
            is_decode=np.append(np.ones(n, dtype=bool), False),
            samples_token=np.ones(n + 1, dtype=bool),
        )
        key = cost._one_rank.key(step)
        assert key is not None
        hits += key in cost._one_rank
        same(cost.step_cost(step), ServingCostModel(*args)._step_cost(step))
    assert hits > 15


def test_steps_the_shape_does_not_price_are_not_memoised() -> None:
    """Two-batch overlap splits a step's requests by context, so its price is not its rank
    shape's alone; a decode step of mixed widths has no key."""
    args = (load_model("deepseek-v3"), load_gpu("h200"))
    tbo = Deployment(name="tp8", attn_tp=8, moe_tp=8, two_batch_overlap=True)
    assert ServingCostModel(*args, tbo, load_profile("h200-roofline"))._one_rank is None
    d = Deployment(name="tp8", attn_tp=8, moe_tp=8)
    cost = ServingCostModel(*args, d, load_profile("h200-roofline"))
    widths = decode_step(np.array([900, 901]), 1)
    widths = BatchShape(**{**widths.__dict__, "new_tokens": np.array([1, 2])})
    assert cost._one_rank.key(widths) is None
