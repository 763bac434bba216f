"""Fused absorbed-MLA attention in Triton: the decode kernel timed where FlashMLA and FlashInfer
are not importable but Triton is (as SGLang's Triton backend serves MLA on such machines).

One program holds a block of query rows of one request (rows are (query token, head) pairs:
every head of a request reads the same latent cache, so the tile loaded once serves them all)
and streams a range of the cache in tiles: scores over the full width (latent + RoPE), an
online softmax in base 2, and the latent part of the same tile as values. Long caches with few
rows are split over several programs (flash-decoding) and merged by log-sum-exp in a second
kernel. Causal masking is bottom-right aligned, as in `mla_torch.latent_attention`: query token
i of s sees the cache up to kv - s + i.

Under TRITON_INTERPRET=1 the same kernels run on the CPU (slowly), which is how the tests check
them without a GPU.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
MIN_SPLIT_TOKENS = 256  # a split streams at least this many cache tokens
TILE_ALIGN = 64  # split boundaries fall on the largest BLOCK_N
REFERENCE_ROWS = 64  # row-block size assumed when sizing the split count
CONFIGS = [
    triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=st)
    for m, n, w, st in ((16, 64, 4, 2), (32, 32, 4, 2), (32, 64, 8, 2), (64, 32, 8, 2))
]


def _partial(
    q_ptr, c_ptr, o_ptr, lse_ptr,
    scale_log2, batch, rows, heads, s_q, kv_len, split_tokens,
    stride_qb, stride_qr, stride_cb, stride_cn,
    stride_ob, stride_os, stride_or, stride_lb, stride_ls,
    D_C: tl.constexpr, D_S: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0).to(tl.int64)  # b * the cache stride passes 2**31 at large batch
    split = tl.program_id(2)
    offs_m = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = offs_m < rows
    offs_c = tl.arange(0, D_C)
    offs_s = tl.arange(0, D_S)
    q_rows = q_ptr + b * stride_qb + offs_m[:, None] * stride_qr
    q_c = tl.load(q_rows + offs_c[None, :], mask=row_ok[:, None], other=0.0)
    q_s = tl.load(q_rows + D_C + offs_s[None, :], mask=row_ok[:, None], other=0.0)
    last = kv_len - s_q + offs_m // heads  # last cache position each row may see
    start = split * split_tokens  # the last split's tail past kv_len is masked
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D_C], tl.float32)
    for n0 in range(0, split_tokens, BLOCK_N):
        in_split = n0 + tl.arange(0, BLOCK_N)
        offs_n = start + in_split
        n_ok = (offs_n < kv_len) & (in_split < split_tokens)  # a tile never crosses into the next
        tile = c_ptr + b * stride_cb + offs_n[:, None] * stride_cn
        k_c = tl.load(tile + offs_c[None, :], mask=n_ok[:, None], other=0.0)
        k_s = tl.load(tile + D_C + offs_s[None, :], mask=n_ok[:, None], other=0.0)
        scores = tl.dot(q_c, tl.trans(k_c)) + tl.dot(q_s, tl.trans(k_s))
        visible = n_ok[None, :] & (offs_n[None, :] <= last[:, None])
        scores = tl.where(visible, scores * scale_log2, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows that see nothing yet
        p = tl.exp2(scores - m_safe[:, None])
        alpha = tl.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(k_c.dtype), k_c)
        m_i = m_new
    seen = l_i > 0.0
    out = acc / tl.where(seen, l_i, 1.0)[:, None]
    o_rows = o_ptr + b * stride_ob + split * stride_os + offs_m[:, None] * stride_or
    tl.store(o_rows + offs_c[None, :], out.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])
    lse = tl.where(seen, m_i + tl.log2(tl.where(seen, l_i, 1.0)), float("-inf"))
    tl.store(lse_ptr + b * stride_lb + split * stride_ls + offs_m, lse, mask=row_ok)


def _bench(kernel_call: object, quantiles: tuple[float, ...]) -> object:
    """Short tuning runs (Triton's default spends 125 ms per config and shape)."""
    return triton.testing.do_bench(kernel_call, warmup=5, rep=20, quantiles=quantiles)


# Triton compiles a variant per integer argument that is 1 or divisible by 16 (each costs a
# compile per tile config, about 1 s). Specialised on the sizes its body uses, the kernel ran
# 2-12% faster on an H200 (875 against 970 us at batch 32 x 16K context) but doubled the decode
# family's time in a --quick run (28 against 15 s): the default grid specialises, --quick does
# not (one compile per tile config). `batch`, only an autotuning key, is never specialised.
SIZES = ["batch", "rows", "heads", "s_q", "kv_len", "split_tokens"]
_partial_specialised = triton.jit(do_not_specialize=["batch"])(_partial)
_partial_lean = triton.jit(do_not_specialize=SIZES)(_partial)


# On a GPU the tile shape is tuned per problem (a few configs, once per shape); the interpreter
# has no benchmarker, so it runs the first config.
def _tuned(kernel: triton.JITFunction) -> triton.runtime.Autotuner:
    key = ["rows", "kv_len", "batch", "split_tokens"]
    return triton.autotune(configs=CONFIGS, key=key, do_bench=_bench)(kernel)


_TUNED = {True: _tuned(_partial_specialised), False: _tuned(_partial_lean)}


def chosen_configs() -> str:
    """The tile configs tuning picked so far, with how many shapes chose each (for the notes)."""
    counts: dict[str, int] = {}
    for config in [c for tuned in _TUNED.values() for c in getattr(tuned, "cache", {}).values()]:
        kw = config.kwargs
        name = f"BLOCK_M={kw['BLOCK_M']} BLOCK_N={kw['BLOCK_N']} warps={config.num_warps}"
        counts[name] = counts.get(name, 0) + 1
    return "; ".join(f"{name}: {n} shapes" for name, n in sorted(counts.items())) or "none tuned"


@triton.jit
def _merge(
    part_ptr, lse_ptr, o_ptr, splits,
    stride_pb, stride_ps, stride_pr, stride_lb, stride_ls, stride_ob, stride_or,
    D_C: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0).to(tl.int64)  # b * the cache stride passes 2**31 at large batch
    r = tl.program_id(1)
    offs_c = tl.arange(0, D_C)
    m = tl.full([1], float("-inf"), tl.float32)
    total = tl.zeros([1], tl.float32)
    acc = tl.zeros([D_C], tl.float32)
    for i in range(0, splits):
        lse = tl.load(lse_ptr + b * stride_lb + i * stride_ls + r + tl.zeros([1], tl.int32))
        m_new = tl.maximum(m, lse)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m - m_safe)
        w = tl.exp2(lse - m_safe)
        part = tl.load(part_ptr + b * stride_pb + i * stride_ps + r * stride_pr + offs_c)
        acc = acc * alpha + w * part
        total = total * alpha + w
        m = m_new
    out = acc / tl.where(total > 0.0, total, 1.0)
    tl.store(o_ptr + b * stride_ob + r * stride_or + offs_c, out.to(o_ptr.dtype.element_ty))


def split_plan(batch: int, rows: int, kv_len: int, processors: int) -> tuple[int, int]:
    """(splits, tokens per split): enough programs for about two waves over the processors,
    each split at least `MIN_SPLIT_TOKENS` long and aligned to the largest tile."""
    row_blocks = math.ceil(rows / REFERENCE_ROWS)
    wanted = math.ceil(2 * processors / (batch * row_blocks))
    splits = max(1, min(wanted, kv_len // MIN_SPLIT_TOKENS))
    tokens = math.ceil(math.ceil(kv_len / splits) / TILE_ALIGN) * TILE_ALIGN
    return math.ceil(kv_len / tokens), tokens


def _processors(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).multi_processor_count)
    return 4


def latent_attention(
    q: torch.Tensor, cache: torch.Tensor, d_c: int, scale: float, *, specialise: bool = True
) -> torch.Tensor:
    """Absorbed attention core, causal: [B, s, H, d_c+d_s] x [B, kv, d_c+d_s] -> [B, s, H, d_c].

    `specialise=False` compiles one variant per tile config for every size (see `SIZES`)."""
    b, s, h, width = q.shape
    kv = cache.shape[1]
    d_s = width - d_c
    if cache.shape[-1] != width or cache.shape[0] != b:
        raise ValueError(f"cache {tuple(cache.shape)} does not match queries {tuple(q.shape)}")
    if d_c & (d_c - 1) or d_s & (d_s - 1) or min(d_c, d_s) < 16:
        raise ValueError(f"latent {d_c} and RoPE {d_s} widths must be powers of two >= 16")
    q = q.contiguous()
    cache = cache.contiguous()
    rows = s * h
    splits, tokens = split_plan(b, rows, kv, _processors(q.device))
    out = torch.empty(b, s, h, d_c, dtype=q.dtype, device=q.device)
    if splits == 1:
        part, part_strides = out, (out.stride(0), 0, d_c)
    else:
        part = torch.empty(b, splits, rows, d_c, dtype=torch.float32, device=q.device)
        part_strides = (part.stride(0), part.stride(1), part.stride(2))
    lse = torch.empty(b, splits, rows, dtype=torch.float32, device=q.device)

    def grid(meta: dict[str, int]) -> tuple[int, int, int]:
        return b, triton.cdiv(rows, meta["BLOCK_M"]), splits

    tuned = q.device.type == "cuda"
    fixed = {} if tuned else {**CONFIGS[0].kwargs, "num_warps": CONFIGS[0].num_warps}
    (_TUNED[specialise] if tuned else _partial_specialised)[grid](
        q, cache, part, lse,
        scale * LOG2E, b, rows, h, s, kv, tokens,
        q.stride(0), width, cache.stride(0), cache.stride(1),
        *part_strides, lse.stride(0), lse.stride(1),
        D_C=d_c, D_S=d_s, **fixed,
    )  # fmt: skip
    if splits > 1:  # split_plan splits only few rows: far below the grid's 65,535 limit
        assert rows <= 65_535, rows
        _merge[(b, rows)](
            part, lse, out, splits,
            part.stride(0), part.stride(1), part.stride(2), lse.stride(0), lse.stride(1),
            out.stride(0), d_c,
            D_C=d_c, num_warps=4,
        )  # fmt: skip
    return out
