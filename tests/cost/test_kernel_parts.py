"""A step's memory-bound kernel parts priced together as arrays (`sim.cost.kernel_parts`) are
`elementwise_ops` of each pair, bit for bit, where the kernels' rate does not depend on shape;
elsewhere they are left to it."""

from __future__ import annotations

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.kernel_parts import kernel_parts
from sim.cost.memo import centre
from sim.cost.rank_work import elementwise_ops
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment

H200 = load_gpu("h200")
CASES = [
    ("deepseek-v3", Deployment(name="dp8", attn_tp=1, moe_ep=8), "h200-roofline"),
    ("deepseek-v3", Deployment(name="dp8_sglang", attn_tp=1, moe_ep=8, engine="sglang"),
     "h200-roofline"),
    ("deepseek-v3", Deployment(name="tp8_trtllm", attn_tp=8, moe_tp=8, engine="trtllm"),
     "h200-roofline"),
    ("deepseek-v3",
     Deployment(name="dp32_bf16", nodes=4, attn_tp=1, moe_ep=32, weight_dtype="bf16"),
     "h200-roofline"),
    ("kimi-k3", Deployment(name="dp32_fp4", nodes=4, attn_tp=1, moe_ep=32, weight_dtype="fp4"),
     "h200-roofline"),
]  # fmt: skip


def pairs(rng: np.random.Generator, n: int) -> list[tuple[float, float]]:
    """(tokens, expanded tokens) at 2^(1/16) bucket centres, as `MixedShape` prices them; a
    third without expanded tokens."""
    out = []
    for _ in range(n):
        t = centre(int(rng.integers(0, 16 * 15)))
        x = 0.0 if rng.random() < 0.35 else centre(int(rng.integers(0, 16 * 17)))
        out.append((t, x))
    return out


@pytest.mark.parametrize(("model", "deployment", "profile"), CASES)
def test_priced_together_they_are_elementwise_ops_bit_for_bit(
    model: str, deployment: Deployment, profile: str
) -> None:
    cm = ServingCostModel(load_model(model), H200, deployment, load_profile(profile))
    given = pairs(np.random.default_rng(len(model) + deployment.attn_tp), 400)
    got = kernel_parts(cm.pricer, cm.ctx, deployment.engine, given)
    launched = 0.0
    for (t, x), ops in zip(given, got, strict=True):
        assert ops is not None
        want = elementwise_ops(cm.pricer, cm.ctx, t, x, deployment.engine)
        # seconds, source, flag and roofline launches, bit for bit
        assert list(ops) == list(want) and ops == want
        launched += sum(op.launches for op in ops.values())
    assert launched > 0  # the launch counts were compared too


def test_a_measured_elementwise_table_leaves_every_pair_to_elementwise_ops() -> None:
    d = Deployment(name="dp8", attn_tp=1, moe_ep=8, engine="sglang")
    cm = ServingCostModel(load_model("deepseek-v3"), H200, d, load_profile("h200-measured"))
    assert kernel_parts(cm.pricer, cm.ctx, d.engine, [(512.0, 0.0), (1024.0, 2048.0)]) == [
        None,
        None,
    ]
