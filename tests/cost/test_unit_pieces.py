"""A step's unit-wide ops priced through the pieces memo are the ops pricing gives: each pass's
routed experts, their kernels and the MTP passes' exchange are kept by the numbers of the load
that set them, so loads sharing some of those numbers share those pieces and nothing else."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.comm_load import CommLoad
from sim.cost.memo import BoundedCache, round_to_bucket
from sim.cost.rate import OpTime
from sim.cost.serving import ServingCostModel
from sim.cost.unit_work import micro_batch_ops, unit_ops
from sim.specs import Deployment

MTP = {"mtp_draft_tokens": 1, "mtp_acceptance": (0.8,)}
CASES = [
    (
        Deployment(name="dp8_ep8", attn_tp=1, moe_ep=8, engine="sglang", **MTP),
        "h200",
        "h200-sglang",
    ),
    (Deployment(name="dp8_ep8_trt", attn_tp=1, moe_ep=8, engine="trtllm"), "h200", "h200-trtllm"),
    (Deployment(name="ep16", nodes=2, attn_tp=1, moe_ep=16, **MTP), "h200", None),
    # EPLB replicas: DeepGEMM's grouped GEMMs, masked (decode) and contiguous layouts apart
    (
        Deployment(name="ep32", nodes=4, attn_tp=1, moe_ep=32, eplb_redundant_experts=32, **MTP),
        "h800",
        "h800-published",
    ),
]


def load(rng: np.random.Generator, decode_only: bool) -> CommLoad:
    """A rounded load whose token counts come from a few values, so that loads share some."""
    r = round_to_bucket
    pick = [64.0, 512.0, 3000.0, 9000.0]
    unit = float(rng.choice(pick)) * 8
    sender = float(rng.choice(pick))
    return CommLoad(
        rank_tokens=r(sender),
        sender_tokens=r(sender),
        unit_tokens=r(unit),
        decode_only=decode_only,
        decode_sender_tokens=0.0 if decode_only else r(float(rng.choice([8.0, 64.0]))),
        decode_unit_tokens=0.0 if decode_only else r(float(rng.choice([64.0, 512.0]))),
    )


@pytest.mark.parametrize(("deployment", "gpu", "profile"), CASES)
def test_unit_ops_through_the_pieces_memo_are_the_same_ops(
    deployment: Deployment, gpu: str, profile: str | None
) -> None:
    pricing = load_profile(profile) if profile else None
    cm = ServingCostModel(load_model("deepseek-v3"), load_gpu(gpu), deployment, pricing)
    args = (cm.pricer, cm.ctx, deployment, cm.gpu)
    memo: BoundedCache[tuple[object, ...], OpTime] = BoundedCache(10_000)
    parts: BoundedCache[tuple[object, ...], dict[str, OpTime]] = BoundedCache(10_000)
    lookups = 0

    def counted(key: tuple[object, ...], price: Callable[[], OpTime]) -> OpTime:
        nonlocal lookups
        lookups += 1
        return memo.get(key, price)

    rng = np.random.default_rng(7)
    mtp = deployment.mtp_draft_tokens > 0
    for _ in range(60):
        decode_only = bool(rng.random() < 0.5)
        step = load(rng, decode_only)
        draft = load(rng, True) if mtp else None
        extend = None if decode_only or not mtp else load(rng, False)
        want = unit_ops(*args, step, draft, extend)
        assert unit_ops(*args, step, draft, extend, counted) == want
        # with the draft and extend parts kept by their loads too: the same ops, in the same
        # order (a step's duration sums them in it)
        got = unit_ops(*args, step, draft, extend, counted, parts.get)
        assert list(got.items()) == list(want.items())
        model = cm.model
        half = micro_batch_ops(cm.pricer, model, deployment, cm.gpu, step)
        assert micro_batch_ops(cm.pricer, model, deployment, cm.gpu, step, counted) == half
    assert len(memo) < lookups / 2  # most pieces were met before


def test_a_steps_draft_and_extend_parts_are_kept_by_their_own_loads() -> None:
    """A mixed step's whole load rarely repeats, its draft passes' (its decode requests) often
    does: with a parts memo, a step whose own load is new reuses the draft and extend ops of
    an earlier step with the same draft and extend loads, and gets what pricing them gives."""
    deployment, gpu, profile = CASES[0]
    pricing = load_profile(profile) if profile else None
    cm = ServingCostModel(load_model("deepseek-v3"), load_gpu(gpu), deployment, pricing)
    assert deployment.mtp_draft_tokens > 0
    args = (cm.pricer, cm.ctx, deployment, cm.gpu)
    rng = np.random.default_rng(3)
    draft, extend = load(rng, True), load(rng, False)
    priced: list[tuple[object, ...]] = []
    parts: BoundedCache[tuple[object, ...], dict[str, OpTime]] = BoundedCache(100)

    def counted(
        key: tuple[object, ...], price: Callable[[], dict[str, OpTime]]
    ) -> dict[str, OpTime]:
        def pricing() -> dict[str, OpTime]:
            priced.append(key)
            return price()

        return parts.get(key, pricing)

    for step in (load(rng, False), load(rng, False)):
        got = unit_ops(*args, step, draft, extend, None, counted)
        assert list(got.items()) == list(unit_ops(*args, step, draft, extend).items())
    assert priced == [("draft", draft), ("extend", extend)]  # each priced once, for both steps
