"""Projection GEMMs of the model over token counts, and the per-head absorb bmms.

Dense: torch.matmul in BF16; FP8 through torch._scaled_mm (per-tensor scales) on CUDA when it
runs and matches the BF16 product. bmm: W_UK [H, d_k, d_c] and W_UV [H, d_c, d_v] applied to m
tokens per head. Each kernel is checked against a float32 product before it is timed.
"""

from __future__ import annotations

from typing import Any

import torch

from kernels_calib import correctness
from kernels_calib.context import Ctx, Row
from kernels_calib.timing import rotation_sets
from sim.specs.model import ModelSpec

FP8_BOUND = 8e-2  # e4m3 rounding of both operands
BF16_BOUND = 1e-2


def projections(model: ModelSpec, heads: int, full: bool) -> list[tuple[str, int, int]]:
    """(name, k, n) of each weight GEMM of one layer (+ lm_head), distinct (k, n) only."""
    m, hidden = model.mla_spec, model.hidden_size
    qk = m.qk_nope_head_dim + m.qk_rope_head_dim
    out = []
    if m.q_lora_rank:
        out += [("q_a_proj", hidden, m.q_lora_rank), ("q_b_proj", m.q_lora_rank, heads * qk)]
    else:
        out += [("q_proj", hidden, heads * qk)]
    out += [
        ("kv_a_proj", hidden, m.kv_lora_rank + m.qk_rope_head_dim),
        ("kv_b_proj", m.kv_lora_rank, heads * (m.qk_nope_head_dim + m.v_head_dim)),
        ("o_proj", heads * m.v_head_dim, hidden),
    ]
    if full:
        moe, shared = model.moe, model.moe.n_shared_experts * model.moe.moe_intermediate_size
        out += [
            ("dense_gate_up", hidden, 2 * moe.dense_intermediate_size),
            ("dense_down", moe.dense_intermediate_size, hidden),
            ("lm_head", hidden, model.vocab_size),
        ]
        if shared:
            out += [("shared_gate_up", hidden, 2 * shared), ("shared_down", shared, hidden)]
    seen: dict[tuple[int, int], str] = {}
    for name, k, n in out:
        seen.setdefault((k, n), name)
    return [(name, k, n) for (k, n), name in seen.items()]


def _fp8(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scale = t.abs().amax().float().clamp_min(1e-12) / 448.0
    return (t.float() / scale).to(torch.float8_e4m3fn), scale


def _operands(ctx: Ctx, dtype: str, m: int, k: int, n: int) -> tuple[object, object]:
    a, w = ctx.randn(m, k), ctx.randn(k, n, std=k**-0.5)
    if dtype == "bf16":
        return a, w
    a8, sa = _fp8(a)
    w8, sw = _fp8(w.t().contiguous())  # [n, k] row-major = [k, n] column-major, as cuBLAS wants
    return (a8, sa), (w8.t(), sw)


def _run(dtype: str, a: Any, w: Any) -> torch.Tensor:
    """a [m, k] @ w [k, n]; FP8 operands are (tensor, scale) pairs from `_operands`."""
    if dtype == "bf16":
        return torch.matmul(a, w)
    a8, sa = a
    w8, sw = w
    return torch._scaled_mm(a8, w8, scale_a=sa, scale_b=sw, out_dtype=torch.bfloat16)


def _check(ctx: Ctx, dtype: str) -> bool:
    a, w = _operands(ctx, dtype, 64, 512, 256)
    ref_a = a if dtype == "bf16" else a[0].float() * a[1]  # type: ignore[index]
    ref_w = w if dtype == "bf16" else w[0].float() * w[1]  # type: ignore[index]
    want = torch.matmul(ref_a.float(), ref_w.float())  # type: ignore[union-attr]
    bound = BF16_BOUND if dtype == "bf16" else FP8_BOUND
    try:
        got = _run(dtype, a, w).float()
    except (RuntimeError, TypeError) as exc:
        ctx.notes.append(f"gemm {dtype}: kernel raised {exc!r}; not timed")
        return False
    result = correctness.compare(got, want, bound, f"gemm {dtype} [{impl_of(dtype)}]")
    ctx.notes.append(result.message)
    return result.ok


def impl_of(dtype: str) -> str:
    return "torch_matmul" if dtype == "bf16" else "torch_scaled_mm"


def dtypes(ctx: Ctx) -> list[str]:
    return [d for d in ctx.plan.gemm_dtypes if d == "bf16" or ctx.device == "cuda"]


def count(ctx: Ctx) -> int:
    gemms = len(projections(ctx.model, ctx.plan.heads, ctx.plan.gemm_full_model))
    return len(ctx.plan.gemm_m) * (gemms * len(dtypes(ctx)) + 2)


def run(ctx: Ctx) -> None:
    p = ctx.plan
    if "fp8" in p.gemm_dtypes and ctx.device != "cuda":
        ctx.notes.append("gemm fp8: needs CUDA (torch._scaled_mm); not timed on this device")
    shapes = projections(ctx.model, p.heads, p.gemm_full_model)
    for dtype in dtypes(ctx):
        ok = _check(ctx, dtype)
        for name, k, n in shapes:
            rows: list[Row] = []
            for m in p.gemm_m:
                ctx.advance(f"gemm {name} {dtype} m={m}")
                if not ok:
                    continue
                sets = rotation_sets((m * k + k * n) * (1 if dtype == "fp8" else 2), ctx.device)
                ops = [_operands(ctx, dtype, m, k, n) for _ in range(sets)]
                rows.append(((float(m),), ctx.time_rotating(_run, [(dtype, *o) for o in ops])))
            ctx.add("gemm", {"k": k, "n": n}, ("m",), rows, dtype=dtype, impl=impl_of(dtype))
    _run_bmm(ctx)


def _run_bmm(ctx: Ctx) -> None:
    """W_UK (k = d_k, n = d_c) and W_UV (k = d_c, n = d_v) over m tokens, one matrix per head."""
    mla, h = ctx.mla, ctx.plan.heads
    a, w = ctx.randn(h, 32, mla.qk_nope_head_dim), ctx.randn(h, mla.qk_nope_head_dim, 64)
    result = correctness.compare(
        torch.bmm(a, w).float(), torch.bmm(a.float(), w.float()), BF16_BOUND, "bmm bf16 [torch_bmm]"
    )
    ctx.notes.append(result.message)
    for k, n in ((mla.qk_nope_head_dim, mla.kv_lora_rank), (mla.kv_lora_rank, mla.v_head_dim)):
        rows: list[Row] = []
        for m in ctx.plan.gemm_m:
            ctx.advance(f"bmm heads={h} {k}x{n} m={m}")
            if not result.ok:
                continue
            sets = rotation_sets(2 * h * (m * k + k * n), ctx.device)
            ops = [(ctx.randn(h, m, k), ctx.randn(h, k, n, std=k**-0.5)) for _ in range(sets)]
            rows.append(((float(m),), ctx.time_rotating(torch.bmm, ops)))
        ctx.add("bmm", {"k": k, "n": n, "batch": h}, ("m",), rows, dtype="bf16", impl="torch_bmm")
