"""The memory-bound kernel parts of a step's ranks priced together, as arrays, where that is
exact.

A rank running prompt chunks prices its memory-bound kernels (`rank_work.elementwise_ops`) by
its tokens and the cached tokens its expand-path chunks up-project, each at a bucket centre
(`sim.cost.mixed_rank`), so a colocated step meets dozens of new pairs, each priced kernel by
kernel (about twenty kernels, a few Python calls each). Where the kernels' rate does not depend
on shape (a roofline, or a profile without an elementwise table: `Pricer.shape_free`), each
kernel's time is its bytes at one rate, so every new pair is priced here at once, with the
same arithmetic in the same order as `elementwise_ops`: the same floats, bit for bit
(`tests/cost/test_kernel_parts.py`). Each kernel reads either the rank's tokens or its
expanded tokens; the kernel list is read once per kind of pair (with or without expanded
tokens) from two probes, and a list that reads anything else is left to `elementwise_ops`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from sim.cost.elementwise import (
    GEMM_INPUT_QUANTS,
    Kernel,
    kernel_op,
    quant_in_gemm_table,
    rank_kernels,
)
from sim.cost.layer_ops import RankContext
from sim.cost.ops import BF16
from sim.cost.pricing import Pricer
from sim.cost.rank_work import Ops, token_segment
from sim.cost.rate import ZERO, OpTime

Array = NDArray[np.float64]
# two probes of (tokens, expanded tokens), distinct from each other and from every product of
# the model's sizes: a kernel whose rows are neither number at both is not priced here
_PROBES = ((3.0, 5.0), (7.0, 11.0))


def kernel_parts(
    pr: Pricer, c: RankContext, engine: str | None, pairs: Sequence[tuple[float, float]]
) -> list[Ops | None]:
    """`elementwise_ops(pr, c, tokens, expanded, engine)` of each (tokens, expanded) pair (a
    rank with chunks: not decode-only), priced together; None for every pair where the
    kernels' rate depends on shape, and for a kind of pair whose kernels read other rows."""
    out: list[Ops | None] = [None] * len(pairs)
    kind = kernel_op(pr)
    rate = pr.shape_free(kind(tokens=1.0, width=1.0))
    if rate is None or not pairs:
        return out
    for expands in (False, True):
        picked = [i for i, (t, x) in enumerate(pairs) if (x > 0) == expands and t > 0]
        kernels = _template(c, engine, pr, expands) if picked else None
        if kernels is None:
            continue
        t = np.array([pairs[i][0] for i in picked], dtype=np.float64)
        x = np.array([pairs[i][1] for i in picked], dtype=np.float64)
        total = np.zeros(len(picked))
        launches = np.zeros(len(picked))
        live = np.zeros(len(picked), dtype=bool)
        hbm, peak = pr.gpu.hbm_bytes_per_s, pr.gpu.peak_flops_per_s("bf16")
        for k, reads_expanded in kernels:
            if k.layers <= 0:
                continue
            rows = x if reads_expanded else t
            flops, nbytes = kind(tokens=rows, width=k.width).work(None, BF16)  # type: ignore[arg-type]
            seconds = rate.times(np.asarray(flops) / peak, np.asarray(nbytes) / hbm)
            if not k.launched:  # inside another kernel: its bytes, not its fixed part
                seconds = seconds - rate.fixed_s
            seconds = seconds * k.layers  # `scale`
            on = (rows > 0) & (seconds > 0.0)  # `price` skips rowless kernels, `combine` zeros
            total = np.where(on, total + seconds, total)
            if k.launched:
                launches = np.where(on, launches + rate.launches * k.layers, launches)
            live |= on
        each = zip(picked, live.tolist(), total.tolist(), launches.tolist(), strict=True)
        for i, on_any, s, n in each:
            t_ = OpTime(seconds=s, source=rate.source, extrapolated=rate.extrapolated, launches=n)
            out[i] = {"elementwise": t_ if on_any else ZERO}
    return out


def _template(
    c: RankContext, engine: str | None, pr: Pricer, expands: bool
) -> list[tuple[Kernel, bool]] | None:
    """The kernels `elementwise_ops` prices for a pair of this kind, each with whether its rows
    are the expanded tokens (else the rank's tokens); None if one reads other rows, or the
    list differs between the probes but for the rows."""
    lists = []
    for t, x in _PROBES:
        kernels = rank_kernels(c, token_segment(t, x if expands else 0.0, False), engine)
        if quant_in_gemm_table(pr, engine):
            kernels = [k for k in kernels if k.name not in GEMM_INPUT_QUANTS]
        lists.append([(k, t, x if expands else 0.0) for k in kernels])
    first, second = lists
    if len(first) != len(second):
        return None
    out = []
    for (a, t0, x0), (b, t1, x1) in zip(first, second, strict=True):
        same = (a.name, a.bytes_per_token, a.layers, a.launched)
        if same != (b.name, b.bytes_per_token, b.layers, b.launched):
            return None
        if a.tokens == t0 and b.tokens == t1:
            out.append((a, False))
        elif expands and a.tokens == x0 and b.tokens == x1:
            out.append((a, True))
        else:
            return None
    return out
