"""Absorb vs expand for an extend (new tokens after a cached prefix): time both whole paths.

- absorb: W_UK folded into the new queries (per-head bmm), latent attention over prefix + new
  tokens, W_UV applied to the latent output (bmm);
- expand: kv_b up-projection of every cached latent (GEMM), then causal attention, q/k 192 v 128.
For each prefix the crossover is where expand becomes faster (interpolated in log new-tokens).
The paths are checked against the float32 references before timing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kernels_calib import correctness, mla_decode, mla_prefill, mla_torch
from kernels_calib.context import Ctx, Row
from sim.specs.profile import CrossoverPoint


@dataclass(frozen=True)
class Extend:
    """One extend's tensors in the layouts an engine keeps them in (batch 1)."""

    case: correctness.MlaCase  # q_nope/q_rope [1, q, H, .], latent/k_rope [1, kv, .]
    w_kv_b: torch.Tensor  # [d_c, H (d_k + d_v)], the checkpoint's kv_b_proj
    cache: torch.Tensor  # [1, kv, d_c + d_s]

    @classmethod
    def of(cls, case: correctness.MlaCase) -> Extend:
        d_c = case.w_uk.shape[2]
        per_head = torch.cat([case.w_uk.transpose(1, 2), case.w_uv], dim=-1)  # [H, d_c, d_k+d_v]
        w_kv_b = per_head.permute(1, 0, 2).reshape(d_c, -1).contiguous()
        cache = torch.cat([case.latent, case.k_rope], dim=-1)
        return cls(case, w_kv_b, cache)


def absorb_path(x: Extend, core: mla_decode.DecodeKernel) -> torch.Tensor:
    c = x.case
    d_c = c.w_uk.shape[2]
    q_lat = torch.bmm(c.q_nope[0].transpose(0, 1), c.w_uk).transpose(0, 1)  # [q, H, d_c]
    q = torch.cat([q_lat[None], c.q_rope], dim=-1)
    o_lat = core.core(q, x.cache, d_c, c.scale)[0]  # [q, H, d_c]
    return torch.bmm(o_lat.transpose(0, 1), c.w_uv).transpose(0, 1)[None]


def expand_path(x: Extend, attend: mla_prefill.Core = mla_torch.expanded_attention) -> torch.Tensor:
    """kv_b up-projection of the whole cache, then expanded attention with `attend`."""
    c = x.case
    heads, d_k = c.w_uk.shape[0], c.w_uk.shape[1]
    k, v = mla_torch.expand_kv(c.latent, c.k_rope, x.w_kv_b, heads, d_k)
    q = torch.cat([c.q_nope, c.q_rope], dim=-1).transpose(1, 2)
    return attend(q, k, v, c.scale).transpose(1, 2)


def _case(ctx: Ctx, new: int, kv: int, heads: int) -> correctness.MlaCase:
    m = ctx.mla
    return correctness.random_case(
        batch=1,
        s_q=new,
        kv_len=kv,
        heads=heads,
        d_c=m.kv_lora_rank,
        d_s=m.qk_rope_head_dim,
        d_k=m.qk_nope_head_dim,
        d_v=m.v_head_dim,
        gen=ctx.gen,
        device=ctx.device,
    )


def _checked(
    ctx: Ctx, kernels: list[mla_decode.DecodeKernel]
) -> tuple[bool, list[mla_decode.DecodeKernel]]:
    """Whether the expand path, and which absorb kernels, match the float32 references on one
    small extend (each result noted)."""
    case = _case(ctx, 24, 160, min(ctx.plan.heads, 16))
    x = Extend.of(case.to(torch.bfloat16))
    bound = correctness.REL_ERROR_BOUND["bf16"]

    def ok(out: torch.Tensor, want: torch.Tensor, what: str) -> bool:
        result = correctness.compare(out.float(), want, bound, f"extend {what}")
        ctx.notes.append(result.message)
        return result.ok

    expand_ok = ok(
        expand_path(x), correctness.absorb(case), "expand path [kv_b matmul + torch_sdpa]"
    )
    want = correctness.expand(case)
    return expand_ok, [k for k in kernels if ok(absorb_path(x, k), want, f"absorb path [{k.impl}]")]


def crossing(
    prefix: int, new: list[int], absorb_us: list[float], expand_us: list[float]
) -> CrossoverPoint:
    """Where expand starts to win, interpolating log(absorb/expand) over log(new tokens)."""
    ratio = [math.log(a / e) for a, e in zip(absorb_us, expand_us, strict=True)]
    first = next((i for i, r in enumerate(ratio) if r > 0), None)
    timed = {
        "prefix_len_tokens": prefix,
        "new_tokens": new,
        "absorb_us": absorb_us,
        "expand_us": expand_us,
    }
    if first is None or first == 0:
        status = "absorb_faster" if first is None else "expand_faster"
        return CrossoverPoint.model_validate({**timed, "status": status})
    x0, x1 = math.log(new[first - 1]), math.log(new[first])
    y0, y1 = ratio[first - 1], ratio[first]
    q = math.exp(x0 - y0 * (x1 - x0) / (y1 - y0))
    return CrossoverPoint.model_validate({**timed, "status": "crossed", "crossover_new_tokens": q})


def count(ctx: Ctx) -> int:
    return 2 * len(ctx.plan.crossover_prefix) * len(ctx.plan.crossover_new)


def _absorb_kernel(
    ctx: Ctx, kernels: list[mla_decode.DecodeKernel]
) -> mla_decode.DecodeKernel | None:
    """The fastest of the checked latent `kernels` at the largest extend, as an engine picks its
    extend kernel for extends. The decode grid's choice does not decide it: decode kernels are
    built for a few query tokens per request, an extend has hundreds."""
    p = ctx.plan
    new, prefix = max(p.crossover_new), max(p.crossover_prefix)
    if len(kernels) < 2:
        return kernels[0] if kernels else None
    x = Extend.of(_case(ctx, new, prefix + new, p.heads).to(torch.bfloat16))
    timed: list[tuple[float, str, mla_decode.DecodeKernel]] = []
    for kernel in kernels:
        ctx.current = f"extend absorb {kernel.impl} probe new={new} prefix={prefix}"
        t = ctx.time_call(absorb_path, x, kernel)  # None (noted) where the kernel cannot run it
        if t is not None:
            timed.append((t.p50_us, kernel.impl, kernel))
    del x
    return ctx.fastest(f"extend absorb path: at new={new} prefix={prefix}", timed, "the crossover")


def run(ctx: Ctx) -> None:
    p, heads = ctx.plan, ctx.plan.heads
    expand_ok, kernels = _checked(ctx, mla_decode.passing(ctx, "bf16"))
    kernel = _absorb_kernel(ctx, kernels) if expand_ok else None
    # the expand side attends with the fastest checked prefill kernel, as an engine would
    probe = (max(p.crossover_new), max(p.crossover_prefix))
    candidates = mla_prefill.one_shot_candidates(ctx)
    attend, attend_impl = mla_prefill.fastest(ctx, "extend expand attention", candidates, probe)
    if kernel is None or attend is None:
        ctx.notes.append("crossover: the extend paths failed their check; not timed")
        for _ in range(count(ctx)):
            ctx.advance("crossover skipped")
        return
    absorb_rows: list[Row] = []
    expand_rows: list[Row] = []
    for prefix in p.crossover_prefix:
        timed: list[tuple[int, float, float]] = []
        for new in p.crossover_new:
            x = Extend.of(_case(ctx, new, prefix + new, heads).to(torch.bfloat16))
            at = (float(new), float(prefix))
            ctx.advance(f"extend absorb new={new} prefix={prefix}")
            a = ctx.time_call(absorb_path, x, kernel)
            ctx.advance(f"extend expand new={new} prefix={prefix}")
            e = ctx.time_call(expand_path, x, attend)
            absorb_rows.append((at, a))
            expand_rows.append((at, e))
            if a is not None and e is not None:
                timed.append((new, a.p50_us, e.p50_us))
            del x
        if timed:
            news, absorb_us, expand_us = (list(col) for col in zip(*timed, strict=True))
            ctx.crossover.append(crossing(prefix, news, absorb_us, expand_us))  # type: ignore[arg-type]
    axes = ("new_tokens", "prefix_len")
    impl = f"bmm+{kernel.impl}"
    ctx.add("mla_extend_absorb", {"heads": heads}, axes, absorb_rows, dtype="bf16", impl=impl)
    ctx.add(
        "mla_extend_expand",
        {"heads": heads},
        axes,
        expand_rows,
        dtype="bf16",
        impl=f"matmul+{attend_impl}",
    )
