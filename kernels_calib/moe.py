"""Grouped expert GEMMs (routed MoE) over tokens per expert.

Every local expert holds the same number of tokens (DeepGEMM's masked layout with uniform load,
key layout 'masked'), so the experts run as one batched GEMM:
- BF16: `torch.bmm`;
- FP8 (CUDA, where torch has it): `torch._scaled_grouped_mm` with row-wise scales (activations
  per token, weights per output column), the weights stored column-major as cuBLAS wants.
gate+up (`moe_up`) and down (`moe_down`) are timed separately, each dtype after a check against
float32 on its own (dequantised) operands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from kernels_calib import correctness
from kernels_calib.context import Ctx, Row
from sim.specs.profile import KeyValue

BOUNDS = {"bf16": 1e-2, "fp8": 8e-2}  # FP8: e4m3 rounding of both operands
IMPLS = {"bf16": "torch_bmm", "fp8": "torch_scaled_grouped_mm"}
FP8_MAX = 448.0


def dtypes(ctx: Ctx) -> list[str]:
    fp8 = ctx.device == "cuda" and hasattr(torch, "_scaled_grouped_mm")
    return ["bf16", "fp8"] if fp8 else ["bf16"]


def count(ctx: Ctx) -> int:
    p = ctx.plan
    return 2 * len(dtypes(ctx)) * len(p.moe_experts) * len(p.moe_tokens_per_expert)


def _rowwise_fp8(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[E, R, C] -> FP8 values and one fp32 scale per row [E, R]."""
    scale = t.float().abs().amax(dim=-1).clamp_min(1e-12) / FP8_MAX
    return (t.float() / scale[..., None]).to(torch.float8_e4m3fn), scale


def fp8_operands(x: torch.Tensor, w: torch.Tensor) -> tuple[Any, ...]:
    """(x8 [E, T, K] row-major, w8 [E, K, N] column-major, x scales [E, T], w scales [E, N])."""
    x8, sx = _rowwise_fp8(x)
    wt8, sw = _rowwise_fp8(w.transpose(1, 2).contiguous())  # [E, N, K]: one scale per column
    return x8, wt8.transpose(1, 2), sx, sw


def fp8_grouped(x8: torch.Tensor, w8: torch.Tensor, sx: torch.Tensor, sw: torch.Tensor) -> Any:
    return torch._scaled_grouped_mm(x8, w8, sx, sw, out_dtype=torch.bfloat16)


def dequantised(x8: torch.Tensor, w8: torch.Tensor, sx: torch.Tensor, sw: torch.Tensor) -> Any:
    """What the FP8 GEMM should compute, in float32."""
    return torch.bmm(x8.float() * sx[..., None], w8.float() * sw[:, None, :])


def _prepare(dtype: str) -> Callable[[torch.Tensor, torch.Tensor], tuple[Any, ...]]:
    return (lambda x, w: (x, w)) if dtype == "bf16" else fp8_operands


def _kernel(dtype: str) -> Callable[..., Any]:
    return torch.bmm if dtype == "bf16" else fp8_grouped


def _check(ctx: Ctx, dtype: str) -> bool:
    x, w = ctx.randn(3, 16, 256), ctx.randn(3, 256, 64, std=256**-0.5)
    ops = _prepare(dtype)(x, w)
    want = torch.bmm(x.float(), w.float()) if dtype == "bf16" else dequantised(*ops)
    what = f"moe {dtype} [{IMPLS[dtype]}]"
    try:
        got = _kernel(dtype)(*ops).float()
    except (RuntimeError, TypeError) as exc:
        ctx.notes.append(f"{what}: raised {exc!r}; not timed")
        return False
    result = correctness.compare(got, want, BOUNDS[dtype], what)
    ctx.notes.append(result.message)
    return result.ok


def run(ctx: Ctx) -> None:
    p, moe, hidden = ctx.plan, ctx.model.moe, ctx.model.hidden_size
    inter = moe.moe_intermediate_size
    for dtype in dtypes(ctx):
        ok = _check(ctx, dtype)
        prepare, kernel = _prepare(dtype), _kernel(dtype)
        for experts in p.moe_experts:
            w_up = ctx.randn(experts, hidden, 2 * inter, std=hidden**-0.5) if ok else None
            w_down = ctx.randn(experts, inter, hidden, std=inter**-0.5) if ok else None
            up: list[Row] = []
            down: list[Row] = []
            for tpe in p.moe_tokens_per_expert:
                t = int(tpe)
                ctx.advance(f"moe_up {dtype} experts={experts} tokens/expert={t}")
                ctx.advance(f"moe_down {dtype} experts={experts} tokens/expert={t}")
                if w_up is None or w_down is None:
                    continue
                x, h = ctx.randn(experts, t, hidden), ctx.randn(experts, t, inter)
                up.append(((float(t),), ctx.time_call(kernel, *prepare(x, w_up))))
                down.append(((float(t),), ctx.time_call(kernel, *prepare(h, w_down))))
            key: dict[str, KeyValue] = {
                "num_local_experts": experts,
                "hidden": hidden,
                "intermediate": inter,
                "layout": "masked",
            }
            for op, rows in (("moe_up", up), ("moe_down", down)):
                ctx.add(op, key, ("tokens_per_expert",), rows, dtype=dtype, impl=IMPLS[dtype])
            del w_up, w_down
        if not ok:
            ctx.notes.append(f"moe {dtype}: failed its check; not timed")
