"""The chunk parts of a step's ranks priced together, as arrays, where that is exact.

A rank running prompt chunks rarely repeats its chunks, so its chunk part (`rank_work.chunk_ops`:
the chunks' attention cores, the kv_b up-projection of their cache and, with MTP, the MTP layer's
projections over them) misses its memo every step (`sim.cost.mixed_rank`), and pricing it op by
op costs a few hundred Python calls per rank. Where the rates do not depend on shape (a
roofline, or a profile without tables for these ops: `Pricer.shape_free`), each op's time is
its work at one rate, so the parts of all of a step's chunk ranks are priced here in a few numpy
calls, with the same arithmetic in the same order as `chunk_ops`: the same floats, bit for bit
(`tests/cost/test_chunk_parts.py`). That holds for chunk sets on one expand path of at most
`MAX_CHUNKS` chunks, whose sums numpy adds in order, as bincount does (`_Sums`); other sets
are left to `chunk_ops`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from sim.cost import mla
from sim.cost.attention_ops import MlaPrefill, MlaPrefillChunked
from sim.cost.dispatch import EXPAND, EXPAND_CHUNKED
from sim.cost.layer_ops import RankContext, compute_dtype, weight_excess_bytes
from sim.cost.mixed_shape import Chunk
from sim.cost.ops import BF16, Gemm, elem_bytes
from sim.cost.pricing import Pricer
from sim.cost.rate import SOURCE_RANK, ZERO, OpTime, Rate
from sim.specs.deployment import Deployment

Ops = dict[str, OpTime]
Array = NDArray[np.float64]
# numpy sums a float64 array of at most 7 values in order (more: in pairs of blocks)
MAX_CHUNKS = 7


def chunk_parts(
    pr: Pricer, c: RankContext, d: Deployment, sets: Sequence[tuple[Chunk, ...]]
) -> list[Ops | None]:
    """`chunk_ops` of each set of chunks (path, new tokens, context, samples), priced together;
    None for a set left to `chunk_ops` (several paths, a path other than expand, more than
    `MAX_CHUNKS` chunks) and for every set where a rate depends on shape."""
    out: list[Ops | None] = [None] * len(sets)
    if c.model.attention != "mla" or not sets:
        return out
    for path in (EXPAND, EXPAND_CHUNKED):
        picked = [i for i, s in enumerate(sets) if _one_path(s, path)]
        if not picked:
            continue
        priced = _priced(pr, c, d, [sets[i] for i in picked], path)
        if priced is None:
            return [None] * len(sets)  # rates that depend on shape: op by op, all of them
        for i, ops in zip(picked, priced, strict=True):
            out[i] = ops
    return out


def _one_path(chunks: tuple[Chunk, ...], path: int) -> bool:
    return 0 < len(chunks) <= MAX_CHUNKS and all(ch[0] == path for ch in chunks)


def _priced(
    pr: Pricer, c: RankContext, d: Deployment, sets: list[tuple[Chunk, ...]], path: int
) -> list[Ops] | None:
    m, mm, h = c.model, c.model.mla_spec, c.heads
    dtype = compute_dtype(c.weight_dtype)
    excess = weight_excess_bytes(c.weight_dtype)
    gemm_rate = pr.shape_free(Gemm(m=1.0, k=1, n=1, weight_excess=excess), dtype)
    core_op: MlaPrefill = MlaPrefill(1.0, 0.0, h)
    if path == EXPAND_CHUNKED:
        core_op = MlaPrefillChunked(1.0, 0.0, h, chunk_tokens=c.chunk_tokens)
    core_rate = pr.shape_free(core_op, "bf16")
    if gemm_rate is None or core_rate is None:
        return None
    sizes = np.array([len(s) for s in sets])
    q = np.array([ch[1] for s in sets for ch in s], dtype=np.float64)
    k = np.array([ch[2] for s in sets for ch in s], dtype=np.float64)
    sums = _Sums(sizes)
    tokens, cached = sums(q), sums(k)
    gpu = pr.gpu
    peak, hbm, e = gpu.peak_flops_per_s(dtype), gpu.hbm_bytes_per_s, elem_bytes(dtype)

    def gemm_s(a: Array, kk: int, nn: int) -> Array:  # `Gemm.work` at `gemm_rate`, as arrays
        flops = 2 * a * kk * nn
        nbytes = e * (a * kk + kk * nn) + BF16 * a * nn + kk * nn * excess
        return _time(gemm_rate, flops / peak, nbytes / hbm)

    # the expanded core (`MlaPrefill.work`) and the up-projection of the cached tokens
    ka = k
    qa = np.minimum(q, ka)
    pairs = qa * ka - qa * (qa - 1.0) / 2.0  # `mla.causal_pairs`
    dk, ds, dv = mm.qk_nope_head_dim, mm.qk_rope_head_dim, mm.v_head_dim
    core_flops = sums(pairs) * mla.expand_pair_flops(mm, int(h))
    core_bytes = BF16 * h * sums((q + k) * (dk + ds) + (k + q) * dv)
    core = _time(core_rate, core_flops / gpu.peak_flops_per_s("bf16"), core_bytes / hbm)
    up = gemm_s(cached, mm.kv_lora_rank, h * (mm.qk_nope_head_dim + mm.v_head_dim))
    prefill = up + core  # `combine(up, core)`
    prefill_src = _weakest(gemm_rate.source, core_rate.source)
    prefill_ext = gemm_rate.extrapolated or core_rate.extrapolated
    layers = m.attention_layers
    mtp = bool(d.mtp_draft_tokens)
    proj = np.zeros(len(sets))
    if mtp:  # the MTP layer's own projections (`mla_layer`'s `price_proj`)
        d_model, qk = m.hidden_size, mm.qk_nope_head_dim + mm.qk_rope_head_dim
        shapes = [
            (mm.q_lora_rank or d_model, h * qk),
            (d_model, (mm.q_lora_rank or 0) + mm.kv_lora_rank + mm.qk_rope_head_dim),
            (h * mm.v_head_dim, d_model),
        ]
        if mm.output_gate:
            shapes.append((d_model, h * mm.v_head_dim))
        for kk, nn in shapes:
            proj = proj + gemm_s(tokens, kk, nn)  # `combine`: 0 + each in turn
    out = []
    zero = OpTime(seconds=ZERO.seconds * layers, source=ZERO.source, extrapolated=False)
    for i in range(len(sets)):
        p = float(prefill[i])
        scaled = OpTime(seconds=p * layers, source=prefill_src, extrapolated=prefill_ext)
        ops = {"mla_bmm": zero, "attn_decode": zero, "attn_prefill": scaled}
        if mtp:
            ops["mtp_prefill"] = OpTime(
                seconds=float(proj[i]) + p,
                source=_weakest(gemm_rate.source, prefill_src),
                extrapolated=gemm_rate.extrapolated or prefill_ext,
            )
        out.append(ops)
    return out


class _Sums:
    """Each set's sum of an array laid out set after set (`sizes`), as `x.sum()` of that set
    alone gives it: numpy adds a float64 array of at most 7 values in order from 0, as
    bincount's running sums do (from 8 on it sums in pairs of blocks)."""

    def __init__(self, sizes: NDArray[np.int64]) -> None:
        self.owner, self.n = np.repeat(np.arange(len(sizes)), sizes), len(sizes)

    def __call__(self, x: Array) -> Array:
        return np.bincount(self.owner, weights=x, minlength=self.n).astype(np.float64, copy=False)


def _time(rate: Rate, compute_s: Array, memory_s: Array) -> Array:
    """`Rate.time` of arrays of work: the slower resource plus the fixed seconds."""
    out: Array = np.maximum(rate.compute_s_per_s * compute_s, rate.memory_s_per_s * memory_s)
    return out + rate.fixed_s


def _weakest(first: str, second: str) -> str:
    """`combine`'s label of two live pieces: the weaker source, the first on a tie."""
    return first if SOURCE_RANK.get(first, 0) <= SOURCE_RANK.get(second, 0) else second
