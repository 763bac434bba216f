"""Expanded MLA prefill / extend: causal attention with q/k 192 and v 128 per head.

Times, over new tokens x prefix length:
- `mla_prefill`: one-shot attention, bottom-right causal when there is a prefix;
- `mla_prefill_chunked`: the prefix attended in chunks and merged by log-sum-exp (SGLang's
  MHA_CHUNKED_KV).
Each has candidate kernels: FlashAttention 3 / 2 when importable, torch SDPA as is and with V
padded to the q/k width (which opens torch's flash backend), and plain matmuls for the chunked
LSE path. Every candidate is checked against the absorb path; those that pass are timed at one
probe point and the fastest times the grid (its name is each table's `impl`, the probe in the
notes). The kv_b up-projection that feeds them is a `gemm` (see gemm.py); whole extend paths,
with projections, are timed by crossover.py.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import math
from collections.abc import Callable
from functools import partial
from typing import Any

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


def _flash_attn_core(lib: Any) -> Core:
    """A FlashAttention build's `flash_attn_func` on SDPA-layout tensors (views, no copies)."""

    def core(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
        qs, ks, vs = (x.transpose(1, 2) for x in (q, k, v))
        out = lib.flash_attn_func(qs, ks, vs, softmax_scale=scale, causal=True)
        out = out[0] if isinstance(out, tuple) else out  # some FA3 builds also return the LSE
        return out.transpose(1, 2)  # type: ignore[no-any-return]

    return core


def _version(module: str) -> str:
    for dist in (module, module.replace("_", "-"), "flash-attn", "flash_attn_3"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


# (what is checked, what is timed): one-shot kernels are checked as they run
Candidate = tuple[str, Core, Core]


def one_shot_candidates(ctx: Ctx) -> list[Candidate]:
    """FlashAttention 3 / 2 when importable (CUDA), then torch SDPA as is and with V padded."""
    found: list[Candidate] = []
    libs = (("flash_attn_interface", "flash_attn_3"), ("flash_attn", "flash_attn_2"))
    for module, impl in libs if ctx.device == "cuda" else ():
        try:
            lib = importlib.import_module(module)
        except ImportError:
            continue
        ctx.libraries[module] = _version(module)
        core = _flash_attn_core(lib)
        found.append((impl, core, core))
    for impl, core in (
        ("torch_sdpa", mla_torch.expanded_attention),
        ("torch_sdpa_vpad", mla_torch.expanded_attention_vpad),
    ):
        found.append((impl, core, core))
    return found


def chunked_candidates(ctx: Ctx, chunk: int) -> list[Candidate]:
    """Chunked-prefix attention over each LSE kernel: flash (V padded) and memory-efficient on
    CUDA, matmuls anywhere. The check uses 64-token chunks so its short prefix is still split."""
    lses: list[tuple[str, mla_torch.LseAttention]] = []
    if ctx.device == "cuda":
        lses.append(("torch_flash_lse_vpad", mla_torch.attention_lse_flash_vpad))
        lses.append(("torch_efficient_lse", mla_torch.attention_lse_fused))
    lses.append(("torch_matmul_lse", mla_torch.attention_lse))
    chunked = mla_torch.chunked_prefix_attention
    return [
        (
            impl,
            partial(chunked, chunk=64, lse_attention=lse),
            partial(chunked, chunk=chunk, lse_attention=lse),
        )
        for impl, lse in lses
    ]


def fastest(
    ctx: Ctx, what: str, candidates: list[Candidate], probe: tuple[int, int]
) -> tuple[Core | None, str]:
    """The fastest candidate at `probe` (new tokens, prefix) among those passing the check."""
    timed: list[tuple[float, str, tuple[Core, str]]] = []
    for impl, checked, core in candidates:
        if not _check(ctx, checked, f"{what} {impl}"):
            continue
        ctx.current = f"{what} {impl} probe seq={probe[0]} prefix={probe[1]}"
        _, t = _time(ctx, core, *probe)
        if t is not None:
            timed.append((t.p50_us, impl, (core, impl)))
    best = ctx.fastest(f"{what}: at seq={probe[0]} prefix={probe[1]}", timed, "the grid")
    return best if best is not None else (None, "none")


def _time(ctx: Ctx, attend: Core, seq: int, prefix: int) -> Row:
    m, h = ctx.mla, ctx.plan.heads
    dqk, dv = m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim
    scale = 1 / math.sqrt(dqk)
    q = ctx.randn(1, h, seq, dqk)
    k, v = ctx.randn(1, h, prefix + seq, dqk), ctx.randn(1, h, prefix + seq, dv)
    return (float(seq), float(prefix)), ctx.time_call(attend, q, k, v, scale)


def run(ctx: Ctx) -> None:
    p, h = ctx.plan, ctx.plan.heads
    probe = (max(p.prefill_seq), 0)
    sdpa, one_shot = fastest(ctx, "mla_prefill", one_shot_candidates(ctx), probe)
    if sdpa is None:
        ctx.notes.append("mla_prefill: no kernel passed the absorb-vs-expand check; not timed")
        for _ in range(count(ctx)):
            ctx.advance("mla_prefill skipped")
        return
    rows: list[Row] = []
    for seq in p.prefill_seq:
        ctx.advance(f"mla_prefill seq={seq}")
        at, timing = _time(ctx, sdpa, seq, 0)
        rows.append(((at[0],), timing))
    key: dict[str, KeyValue] = {"heads": h, "prefix_len": 0}
    ctx.add("mla_prefill", key, ("seq_len",), rows, dtype="bf16", impl=one_shot)
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
        impl=one_shot,
    )
    probe = (max(p.prefill_seq), max(p.prefill_prefix))
    candidates = chunked_candidates(ctx, p.chunk_tokens)
    chunked, impl = fastest(ctx, "mla_prefill_chunked", candidates, probe)
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
