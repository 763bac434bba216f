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
from sim.cost.layer_ops import (
    RankContext,
    compute_dtype,
    projection_shapes,
    up_projection_width,
    weight_excess_bytes,
)
from sim.cost.mixed_shape import Chunk
from sim.cost.ops import BF16, Gemm, elem_bytes
from sim.cost.pricing import Pricer
from sim.cost.rate import ZERO, OpTime, Rate, combine, scale
from sim.specs.deployment import Deployment

Ops = dict[str, OpTime]
Array = NDArray[np.float64]
# numpy sums a float64 array of at most 7 values in order (more: in pairs of blocks)
MAX_CHUNKS = 7


def chunk_parts(
    pr: Pricer,
    c: RankContext,
    d: Deployment,
    sets: Sequence[tuple[Chunk, ...]],
    attention_only: bool = False,
) -> list[Ops | None]:
    """`chunk_ops` of each set of chunks (path, new tokens, context, samples), priced together
    (`attention_only`: `chunk_attention_ops`, without the MTP layer); None for a set left to
    `chunk_ops` (several paths, a path other than expand, more than `MAX_CHUNKS` chunks) and
    for every set where a rate depends on shape."""
    out: list[Ops | None] = [None] * len(sets)
    if c.model.attention != "mla" or not sets:
        return out
    mtp = bool(d.mtp_draft_tokens) and not attention_only
    for path in (EXPAND, EXPAND_CHUNKED):
        picked = [i for i, s in enumerate(sets) if _one_path(s, path)]
        if not picked:
            continue
        priced = _priced(pr, c, [sets[i] for i in picked], path, mtp)
        if priced is None:
            return [None] * len(sets)  # rates that depend on shape: op by op, all of them
        for i, ops in zip(picked, priced, strict=True):
            out[i] = ops
    return out


def _one_path(chunks: tuple[Chunk, ...], path: int) -> bool:
    return 0 < len(chunks) <= MAX_CHUNKS and all(ch[0] == path for ch in chunks)


def _priced(
    pr: Pricer, c: RankContext, sets: list[tuple[Chunk, ...]], path: int, mtp: bool
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

    def gemm_s(a: Array, kk: int, nn: int) -> Array:  # `Gemm.work` of every m at `gemm_rate`
        op = Gemm(m=a, k=kk, n=nn, weight_excess=excess)  # type: ignore[arg-type]
        flops, nbytes = op.work(None, e)  # arrays, as `m` is
        return gemm_rate.times(np.asarray(flops) / peak, np.asarray(nbytes) / hbm)

    # the expanded core (`MlaPrefill.work`, its sums per set) and the up-projection of the cache
    dk, ds, dv = mm.qk_nope_head_dim, mm.qk_rope_head_dim, mm.v_head_dim
    core_flops = sums(np.asarray(mla.causal_pairs(q, k))) * mla.expand_pair_flops(mm, int(h))
    core_bytes = BF16 * h * sums((q + k) * (dk + ds) + (k + q) * dv)
    core = core_rate.times(core_flops / gpu.peak_flops_per_s("bf16"), core_bytes / hbm)
    up = gemm_s(cached, mm.kv_lora_rank, up_projection_width(c))
    prefill = up + core  # `combine(up, core)`, its label that of any two such pieces
    label = combine(_unit(gemm_rate), _unit(core_rate))
    layers = m.attention_layers
    proj = np.zeros(len(sets))
    shapes = projection_shapes(c) if mtp else []
    for kk, nn in shapes:  # the MTP layer's own projections
        proj = proj + gemm_s(tokens, kk, nn)  # `combine`: 0 + each in turn
    mtp_label = combine(_unit(gemm_rate), label)  # the projections' and the prefill's
    # each piece is one call at its rate (every set has tokens: all its pieces are live)
    mtp_launches = len(shapes) * gemm_rate.launches + label.launches
    out = []
    zero = scale(ZERO, layers)
    for i in range(len(sets)):
        p = float(prefill[i])
        attn = _at(label, p * layers, label.launches * layers)
        ops = {"mla_bmm": zero, "attn_decode": zero, "attn_prefill": attn}
        if mtp:
            ops["mtp_prefill"] = _at(mtp_label, float(proj[i]) + p, mtp_launches)
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


def _unit(rate: Rate) -> OpTime:
    """A live piece priced at `rate`, one call: what `combine` reads of it to label a sum."""
    return OpTime(
        seconds=1.0, source=rate.source, extrapolated=rate.extrapolated, launches=rate.launches
    )


def _at(label: OpTime, seconds: float, launches: float) -> OpTime:
    return OpTime(
        seconds=seconds, source=label.source, extrapolated=label.extrapolated, launches=launches
    )
