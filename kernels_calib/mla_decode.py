"""Absorbed MLA decode: latent attention over batch x context x query tokens x KV dtype.

Candidates for BF16 KV: FlashMLA and FlashInfer's MLA kernel (CUDA, when importable), the
project's fused Triton kernel (`mla_triton`, CUDA, when Triton is importable) and the unfused
torch fallback (`mla_torch.latent_attention`). Each is checked against the expand reference; a
failing one is reported and skipped. Of those that pass, the fastest at the grid's middle point
times the grid, and the profile notes every candidate's time there.

FP8 KV has no candidate yet: FlashMLA's dense decode reads BF16 KV only (its FP8 format serves
the sparse kernel), and dequantising the cache in torch before a BF16 kernel is not what a
serving engine runs; its times would make FP8 KV look slower than BF16. So no fp8 table is
written and the profile says so; the cost model then prices FP8-KV decode at FP8 bytes with the
bf16 table's efficiency, marked extrapolated.
"""

from __future__ import annotations

import importlib.metadata
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from kernels_calib import correctness, mla_torch
from kernels_calib.context import Ctx, Row
from kernels_calib.timing import rotation_sets
from sim.cost.attention_ops import kv_bytes_per_token
from sim.specs.profile import KeyValue

TIMED_KV = ("bf16",)  # KV dtypes with a decode kernel to time (see the module docstring)
NO_KERNEL = (
    "mla_decode {kv}: no {kv}-KV decode kernel is available here (FlashMLA's dense decode reads "
    "BF16 KV; a torch dequantise-then-BF16 path is not what serving engines run), so no {kv} "
    "table is written: the cost model prices {kv}-KV decode at {kv} bytes with the bf16 "
    "table's efficiency, marked extrapolated"
)


@dataclass(frozen=True)
class DecodeKernel:
    impl: str
    prepare: Callable[[torch.Tensor, torch.Tensor, int, float], Any]  # (q, cache, d_c, scale)
    run: Callable[[Any], torch.Tensor]  # prepared state -> [B, s, H, d_c]

    def core(self, q: torch.Tensor, cache: torch.Tensor, d_c: int, scale: float) -> torch.Tensor:
        return self.run(self.prepare(q, cache, d_c, scale))


def _torch_bf16() -> DecodeKernel:
    return DecodeKernel(
        impl="torch_bmm",
        prepare=lambda q, c, d_c, scale: (q, c, d_c, scale),
        run=lambda s: mla_torch.latent_attention(*s),
    )


def _flash_mla(ctx: Ctx) -> DecodeKernel | None:
    """FlashMLA's paged decode kernel (block size 64), when the library is importable."""
    try:
        import flash_mla  # type: ignore[import-not-found]
    except ImportError:
        return None
    ctx.libraries["flash_mla"] = _version("flash_mla")

    def prepare(q: torch.Tensor, cache: torch.Tensor, d_c: int, scale: float) -> Any:
        b, kv, width = cache.shape
        blocks = math.ceil(kv / 64)
        paged = F.pad(cache, (0, 0, 0, blocks * 64 - kv)).reshape(b * blocks, 64, 1, width)
        table = torch.arange(b * blocks, dtype=torch.int32, device=q.device).view(b, blocks)
        lens = torch.full((b,), kv, dtype=torch.int32, device=q.device)
        meta, splits = flash_mla.get_mla_metadata(lens, q.shape[1] * q.shape[2], 1)
        return q, paged, table, lens, d_c, meta, splits, scale

    def run(s: Any) -> torch.Tensor:
        q, paged, table, lens, d_c, meta, splits, scale = s
        out, _ = flash_mla.flash_mla_with_kvcache(
            q, paged, table, lens, d_c, meta, splits, softmax_scale=scale, causal=True
        )
        return out  # type: ignore[no-any-return]

    return DecodeKernel(impl="flash_mla", prepare=prepare, run=run)


def _flashinfer_mla(ctx: Ctx) -> DecodeKernel | None:
    """FlashInfer's paged MLA kernel (page size 1, latent and RoPE caches apart), if importable.

    Planning (host-side scheduling) happens in `prepare`, outside the timed region, as an engine
    plans once per batch and replays the kernel in every layer.
    """
    try:
        from flashinfer.mla import BatchMLAPagedAttentionWrapper  # type: ignore[import-not-found]
    except ImportError:
        return None
    ctx.libraries["flashinfer"] = _version("flashinfer-python")

    def prepare(q: torch.Tensor, cache: torch.Tensor, d_c: int, scale: float) -> Any:
        b, s, h, _ = q.shape
        kv, dev = cache.shape[1], q.device
        wrapper = BatchMLAPagedAttentionWrapper(
            torch.empty(128 << 20, dtype=torch.uint8, device=dev), backend="auto"
        )

        def ints(n: int, step: int = 1) -> torch.Tensor:
            return torch.arange(n, dtype=torch.int32, device=dev) * step

        wrapper.plan(
            ints(b + 1, s),  # qo_indptr
            ints(b + 1, kv),  # kv_indptr (one token per page)
            ints(b * kv),  # kv_indices
            torch.full((b,), kv, dtype=torch.int32, device=dev),  # kv_len_arr
            h, d_c, cache.shape[-1] - d_c, 1, s > 1, scale, q.dtype, cache.dtype,
        )  # fmt: skip
        flat = q.reshape(b * s, h, -1)
        pages = cache.reshape(b * kv, 1, -1)
        parts = (flat[..., :d_c], flat[..., d_c:], pages[..., :d_c], pages[..., d_c:])
        return wrapper, tuple(t.contiguous() for t in parts), (b, s, h, d_c)

    def run(state: Any) -> torch.Tensor:
        wrapper, (q_nope, q_pe, ckv, kpe), shape = state
        return wrapper.run(q_nope, q_pe, ckv, kpe).view(*shape)  # type: ignore[no-any-return]

    return DecodeKernel(impl="flashinfer_mla", prepare=prepare, run=run)


def _triton_mla(ctx: Ctx) -> DecodeKernel | None:
    """The project's fused Triton kernel (`mla_triton`), when Triton is importable."""
    try:
        from kernels_calib import mla_triton
    except ImportError:
        return None
    except Exception as exc:  # installed but unusable here (no driver it can load, ...)
        ctx.notes.append(f"mla_decode triton_mla: Triton did not load ({exc!r}); not timed")
        return None
    ctx.libraries["triton"] = _version("triton")
    specialise = not ctx.plan.quick  # --quick's minute has no room for a compile per size class
    if not specialise:
        ctx.notes.append(
            "mla_decode triton_mla: compiled once per tile config (--quick), not per size class "
            "as the default run does; on an H200 that made it 2-12% slower"
        )
    return DecodeKernel(
        impl="triton_mla",
        prepare=lambda q, c, d_c, scale: (q, c, d_c, scale),
        run=lambda s: mla_triton.latent_attention(*s, specialise=specialise),
    )


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def candidates(ctx: Ctx, kv_dtype: str) -> list[DecodeKernel]:
    """Kernels to try for this KV dtype, best first; none but BF16 (see the module docstring)."""
    if kv_dtype not in TIMED_KV:
        return []
    found: list[DecodeKernel] = []
    if ctx.device == "cuda":
        for make in (_flash_mla, _flashinfer_mla, _triton_mla):
            kernel = make(ctx)
            if kernel is not None:
                found.append(kernel)
    return [*found, _torch_bf16()]


def checked_kernel(ctx: Ctx, kv_dtype: str) -> DecodeKernel | None:
    """The fastest, at the grid's middle point, of the candidates whose absorb output matches the
    expand reference (picked once per run; the crossover picks its own from `passing`)."""
    key = f"mla_decode {kv_dtype}"
    if key not in ctx.chosen:
        ctx.chosen[key] = _fastest(ctx, kv_dtype, passing(ctx, kv_dtype))
    kernel = ctx.chosen[key]
    assert kernel is None or isinstance(kernel, DecodeKernel)
    return kernel


def passing(ctx: Ctx, kv_dtype: str) -> list[DecodeKernel]:
    """The candidates whose absorb output matches the expand reference, each noted (checked
    once per run)."""
    key = f"mla_decode {kv_dtype} passing"
    if key not in ctx.chosen:
        ctx.chosen[key] = _passing(ctx, kv_dtype)
    kernels = ctx.chosen[key]
    assert isinstance(kernels, list)
    return kernels


def _passing(ctx: Ctx, kv_dtype: str) -> list[DecodeKernel]:
    m = ctx.mla
    case = correctness.random_case(
        batch=2,
        s_q=max(ctx.plan.decode_s_q),
        kv_len=200,
        heads=ctx.plan.heads,
        d_c=m.kv_lora_rank,
        d_s=m.qk_rope_head_dim,
        d_k=m.qk_nope_head_dim,
        d_v=m.v_head_dim,
        gen=ctx.gen,
        device=ctx.device,
    )
    bound = correctness.REL_ERROR_BOUND[kv_dtype]
    passing = []
    for kernel in candidates(ctx, kv_dtype):
        try:
            result = correctness.check_absorb_kernel(
                case, kernel.core, torch.bfloat16, bound, f"mla_decode {kernel.impl} {kv_dtype}"
            )
        except Exception as exc:  # a library kernel may reject the call outright
            ctx.notes.append(f"mla_decode {kernel.impl} {kv_dtype}: raised {exc!r}; not timed")
            continue
        ctx.notes.append(result.message)
        if result.ok:
            passing.append(kernel)
    return passing


def _fastest(ctx: Ctx, kv_dtype: str, kernels: list[DecodeKernel]) -> DecodeKernel | None:
    """The fastest of `kernels` at the grid's middle point (one query token), noted with every
    time, so a profile says what the kernel it did not time would have cost."""
    if len(kernels) < 2:
        return kernels[0] if kernels else None
    p, m = ctx.plan, ctx.mla
    b, kv = p.decode_batch[len(p.decode_batch) // 2], p.decode_kv[len(p.decode_kv) // 2]
    width = m.kv_lora_rank + m.qk_rope_head_dim
    scale = 1 / math.sqrt(m.qk_nope_head_dim + m.qk_rope_head_dim)
    q, cache = ctx.randn(b, 1, p.heads, width), ctx.randn(b, kv, width)
    timed = []
    for kernel in kernels:
        ctx.current = f"mla_decode {kv_dtype} {kernel.impl} probe batch={b} kv={kv}"
        t = ctx.time_rotating(kernel.run, [(kernel.prepare(q, cache, m.kv_lora_rank, scale),)])
        if t is not None:
            timed.append((t.p50_us, kernel.impl, kernel))
    del q, cache
    where = f"mla_decode {kv_dtype}: at s_q=1 batch={b} kv={kv}"
    return ctx.fastest(where, timed, "the grid") or kernels[0]


def points(ctx: Ctx) -> list[tuple[int, int, int, int, str]]:
    p = ctx.plan
    return [
        (heads, s_q, b, kv, kv_dtype)
        for kv_dtype in p.kv_dtypes
        if kv_dtype in TIMED_KV
        for heads in p.decode_heads
        for s_q in p.decode_s_q
        for b in p.decode_batch
        for kv in p.decode_kv
        if b * kv <= p.max_cache_tokens
    ]


def count(ctx: Ctx) -> int:
    return len(points(ctx))


def run(ctx: Ctx) -> None:
    m = ctx.mla
    width = m.kv_lora_rank + m.qk_rope_head_dim
    scale = 1 / math.sqrt(m.qk_nope_head_dim + m.qk_rope_head_dim)
    sizes = [b * kv for b in ctx.plan.decode_batch for kv in ctx.plan.decode_kv]
    if any(t > ctx.plan.max_cache_tokens for t in sizes):
        ctx.notes.append(
            f"mla_decode: points with batch x kv_len > {ctx.plan.max_cache_tokens} tokens skipped "
            "(memory); the grid is split into full tables"
        )
    todo = points(ctx)
    for kv_dtype in ctx.plan.kv_dtypes:
        kernel = checked_kernel(ctx, kv_dtype) if kv_dtype in TIMED_KV else None
        if kv_dtype not in TIMED_KV:
            ctx.notes.append(NO_KERNEL.format(kv=kv_dtype))
        elif kernel is None:
            ctx.notes.append(f"mla_decode {kv_dtype}: no kernel passed the check; not timed")
        for heads, s_q in [(h, s) for h in ctx.plan.decode_heads for s in ctx.plan.decode_s_q]:
            rows: list[Row] = []
            for _, _, b, kv, _ in [t for t in todo if t[:2] == (heads, s_q) and t[4] == kv_dtype]:
                ctx.advance(f"mla_decode {kv_dtype} heads={heads} s_q={s_q} b={b} kv={kv}")
                if kernel is None:
                    continue
                sets = rotation_sets(b * kv * kv_bytes_per_token(m, kv_dtype), ctx.device)
                states = [
                    kernel.prepare(
                        ctx.randn(b, s_q, heads, width),
                        ctx.randn(b, kv, width),
                        m.kv_lora_rank,
                        scale,
                    )
                    for _ in range(sets)
                ]
                rows.append(
                    ((float(b), float(kv)), ctx.time_rotating(kernel.run, [(st,) for st in states]))
                )
                del states
            if kernel is not None:
                key: dict[str, KeyValue] = {"s_q": s_q, "kv_dtype": kv_dtype, "heads": heads}
                ctx.add(
                    "mla_decode", key, ("batch", "kv_len"), rows, dtype="bf16", impl=kernel.impl
                )
        if kernel is not None and kernel.impl == "triton_mla":
            from kernels_calib import mla_triton

            ctx.notes.append(f"mla_decode triton_mla tiles chosen: {mla_triton.chosen_configs()}")
