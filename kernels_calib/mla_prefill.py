"""Expanded MLA prefill / extend: causal attention with q/k 192 and v 128 per head.

Times, over new tokens x prefix length:
- `mla_prefill`: one-shot attention (SDPA, bottom-right causal mask when there is a prefix);
- `mla_prefill_chunked`: the prefix attended in chunks and merged by log-sum-exp (SGLang's
  MHA_CHUNKED_KV), through torch's fused kernel on CUDA when it passes the check, else matmuls.
The kv_b up-projection that feeds them is a `gemm` (see gemm.py); whole extend paths, with
projections, are timed by crossover.py. Both kernels are checked against the absorb path first.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import torch

from kernels_calib import correctness, mla_torch
from kernels_calib.context import Ctx, Row
from sim.specs.profile import KeyValue

Core = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float], torch.Tensor]


def count(ctx: Ctx) -> int:
    p = ctx.plan
    return len(p.prefill_seq) * (1 + 2 * len(p.prefill_prefix))


def _check(ctx: Ctx, core: Core, what: str) -> bool:
    m = ctx.mla
    case = correctness.random_case(
        batch=1,
        s_q=48,
        kv_len=200,
        heads=min(ctx.plan.heads, 16),
        d_c=m.kv_lora_rank,
        d_s=m.qk_rope_head_dim,
        d_k=m.qk_nope_head_dim,
        d_v=m.v_head_dim,
        gen=ctx.gen,
        device=ctx.device,
    )
    try:
        result = correctness.check_expand_kernel(
            case, core, torch.bfloat16, correctness.REL_ERROR_BOUND["bf16"], what
        )
    except Exception as exc:  # a fused kernel may reject the shapes
        ctx.notes.append(f"{what}: raised {exc!r}; not used")
        return False
    ctx.notes.append(result.message)
    return result.ok


def chunked_core(ctx: Ctx, chunk: int) -> tuple[Core | None, str]:
    """The chunked-prefix kernel that passes the check: fused LSE on CUDA, else matmuls.

    The check runs with a small chunk so that its short prefix is still split.
    """
    options: list[tuple[str, mla_torch.LseAttention]] = []
    if ctx.device == "cuda":
        options.append(("torch_efficient_lse", mla_torch.attention_lse_fused))
    options.append(("torch_matmul_lse", mla_torch.attention_lse))
    for impl, lse in options:
        checked = partial(mla_torch.chunked_prefix_attention, chunk=64, lse_attention=lse)
        if _check(ctx, checked, f"mla_prefill_chunked {impl}"):
            return partial(mla_torch.chunked_prefix_attention, chunk=chunk, lse_attention=lse), impl
    return None, "none"


def _time(ctx: Ctx, attend: Core, seq: int, prefix: int) -> Row:
    m, h = ctx.mla, ctx.plan.heads
    dqk, dv = m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim
    scale = 1 / math.sqrt(dqk)
    q = ctx.randn(1, h, seq, dqk)
    k, v = ctx.randn(1, h, prefix + seq, dqk), ctx.randn(1, h, prefix + seq, dv)
    return (float(seq), float(prefix)), ctx.time_call(attend, q, k, v, scale)


def run(ctx: Ctx) -> None:
    p, h = ctx.plan, ctx.plan.heads
    sdpa = mla_torch.expanded_attention
    if not _check(ctx, sdpa, "mla_prefill torch_sdpa"):
        ctx.notes.append("mla_prefill: SDPA failed the absorb-vs-expand check; not timed")
        for _ in range(count(ctx)):
            ctx.advance("mla_prefill skipped")
        return
    rows: list[Row] = []
    for seq in p.prefill_seq:
        ctx.advance(f"mla_prefill seq={seq}")
        at, timing = _time(ctx, sdpa, seq, 0)
        rows.append(((at[0],), timing))
    key: dict[str, KeyValue] = {"heads": h, "prefix_len": 0}
    ctx.add("mla_prefill", key, ("seq_len",), rows, dtype="bf16", impl="torch_sdpa")
    grid = [(seq, prefix) for seq in p.prefill_seq for prefix in p.prefill_prefix]
    rows = []
    for seq, prefix in grid:
        ctx.advance(f"mla_prefill seq={seq} prefix={prefix}")
        rows.append(_time(ctx, sdpa, seq, prefix))
    ctx.add(
        "mla_prefill",
        {"heads": h},
        ("seq_len", "prefix_len"),
        rows,
        dtype="bf16",
        impl="torch_sdpa",
    )
    chunked, impl = chunked_core(ctx, p.chunk_tokens)
    rows = []
    for seq, prefix in grid:
        ctx.advance(f"mla_prefill_chunked seq={seq} prefix={prefix}")
        if chunked is not None:
            rows.append(_time(ctx, chunked, seq, prefix))
    if chunked is None:
        ctx.notes.append("mla_prefill_chunked: no LSE kernel passed the check; not timed")
        return
    key = {"heads": h, "chunk_tokens": p.chunk_tokens}
    ctx.add("mla_prefill_chunked", key, ("seq_len", "prefix_len"), rows, dtype="bf16", impl=impl)
