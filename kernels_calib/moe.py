"""Grouped expert GEMMs (routed MoE) over tokens per expert.

The torch fallback runs every local expert's GEMM as one bmm over experts holding the same
number of tokens, which is DeepGEMM's masked layout with uniform load (key layout 'masked').
gate+up (`moe_up`) and down (`moe_down`) are timed separately, after a check against float32.
"""

from __future__ import annotations

import torch

from kernels_calib import correctness
from kernels_calib.context import Ctx, Row
from sim.specs.profile import KeyValue

BF16_BOUND = 1e-2


def count(ctx: Ctx) -> int:
    return 2 * len(ctx.plan.moe_experts) * len(ctx.plan.moe_tokens_per_expert)


def _check(ctx: Ctx) -> bool:
    x, w = ctx.randn(3, 5, 256), ctx.randn(3, 256, 64, std=256**-0.5)
    want = torch.stack([x[e].float() @ w[e].float() for e in range(3)])
    result = correctness.compare(torch.bmm(x, w).float(), want, BF16_BOUND, "moe bmm bf16")
    ctx.notes.append(result.message)
    return result.ok


def run(ctx: Ctx) -> None:
    p, moe, hidden = ctx.plan, ctx.model.moe, ctx.model.hidden_size
    inter = moe.moe_intermediate_size
    ok = _check(ctx)
    for experts in p.moe_experts:
        w_up = ctx.randn(experts, hidden, 2 * inter, std=hidden**-0.5) if ok else None
        w_down = ctx.randn(experts, inter, hidden, std=inter**-0.5) if ok else None
        up: list[Row] = []
        down: list[Row] = []
        for tpe in p.moe_tokens_per_expert:
            t = int(tpe)
            ctx.advance(f"moe_up experts={experts} tokens/expert={t}")
            ctx.advance(f"moe_down experts={experts} tokens/expert={t}")
            if w_up is None or w_down is None:
                continue
            x, h = ctx.randn(experts, t, hidden), ctx.randn(experts, t, inter)
            up.append(((float(t),), ctx.time_call(torch.bmm, x, w_up)))
            down.append(((float(t),), ctx.time_call(torch.bmm, h, w_down)))
        key: dict[str, KeyValue] = {
            "num_local_experts": experts,
            "hidden": hidden,
            "intermediate": inter,
            "layout": "masked",
        }
        ctx.add("moe_up", key, ("tokens_per_expert",), up, dtype="bf16", impl="torch_bmm")
        ctx.add("moe_down", key, ("tokens_per_expert",), down, dtype="bf16", impl="torch_bmm")
        del w_up, w_down
    if not ok:
        ctx.notes.append("moe: bmm failed its check; not timed")
