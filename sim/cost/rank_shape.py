"""A rank's work in a step as a memo key: its segments rounded before they are priced.

The ranks of a lock-step unit repeat the same shapes of work from step to step, so a rank's own
ops are priced once per shape and memoised (`sim.cost.serving`). So that the memo only ever
returns what pricing would, a rank's segments are first rounded to their `RankShape` and the
shape's own segments are priced: a step's price is a function of its batch alone, never of what
was priced before it.

A shape keeps a rank's decode (and verify) requests by MLA path and width, each group by its
count and its context sum, rounded to a 2^(1/16) bucket (within 2.2%): every op of a decode
request grows with its context linearly (the absorbed core's pairs, its cache read, the
indexer's scores), so a group's work follows its count and context sum; a shape's requests all
hold the sum's mean. The sum is rounded, not the mean, so that one more request never rounds a
rank's work down (a shorter request can lower the mean across a bucket edge). Two uses of the
individual contexts are lost: the DSA top-k selection's index write, sized by the longest
context below top-k, and two-batch overlap's split of the requests by context. Powers of two
are bucket centres, so a table's power-of-two grid points come back exactly at a power-of-two
count of requests. A prefill chunk keeps its path, whether it samples, its new tokens and its
context exactly: prompts of one length (a fixed-length benchmark) would all round the same
way, and a chunk's attention grows with the square of its tokens, so rounding them would bias
a run instead of averaging out. (Where a rank's work splits into parts, a rank with chunks is
shaped as a `sim.cost.mixed_shape.MixedShape` instead and priced from memoised parts.)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from sim.cost.layer_ops import RankSegments
from sim.cost.memo import buckets, centre

DecodeGroup = tuple[int, int, int, int]  # path, new tokens each, requests, context-sum bucket
Chunk = tuple[int, int, int, bool]  # path, new tokens, context, samples a token


class RankShape(NamedTuple):
    """One rank's step work, rounded: its decode groups and its prefill chunks (sorted)."""

    decode: tuple[DecodeGroup, ...]
    chunks: tuple[Chunk, ...] = ()


def rank_shape(
    q: NDArray[np.int64],
    k: NDArray[np.int64],
    is_decode: NDArray[np.bool_],
    path: NDArray[np.int8],
    samples: NDArray[np.bool_] | None,
) -> RankShape:
    """The shape of one rank's segments (new tokens, contexts, decode flags, MLA paths, and
    which segments sample; None: all)."""
    groups: list[DecodeGroup] = []
    dec = np.flatnonzero(is_decode)
    if dec.size:
        code = path[dec].astype(np.int64) << 32 | q[dec]
        kinds, inverse = np.unique(code, return_inverse=True)
        n = np.bincount(inverse)
        sum_k = np.bincount(inverse, weights=k[dec].astype(np.float64)).astype(np.float64)
        columns = (kinds.tolist(), n.tolist(), buckets(sum_k).tolist())
        for kind, count, b in zip(*columns, strict=True):
            groups.append((kind >> 32, kind & 0xFFFFFFFF, count, b))
    pre = np.flatnonzero(~is_decode)
    chunks: list[Chunk] = []
    if pre.size:
        smp = np.ones(pre.size, dtype=bool) if samples is None else samples[pre]
        p_, q_, k_, s_ = path[pre].tolist(), q[pre].tolist(), k[pre].tolist(), smp.tolist()
        chunks = sorted(zip(p_, q_, k_, s_, strict=True))
    return RankShape(tuple(groups), tuple(chunks))


def decode_shapes(
    n_r: NDArray[np.int64], kv_sum_r: NDArray[np.float64], width: int, path: int
) -> tuple[list[RankShape], NDArray[np.intp]]:
    """Shapes of decode-only ranks whose requests share one width and path, from their request
    counts and context sums (all positive): the distinct shapes and each rank's index into
    them (vectorised: one shape per distinct count and bucket)."""
    b = buckets(kv_sum_r)
    sig = n_r.astype(np.int64) << 32 | (b + (1 << 20))
    uniq, first, inverse = np.unique(sig, return_index=True, return_inverse=True)
    shapes = [RankShape(((path, width, int(n_r[i]), int(b[i])),)) for i in first.tolist()]
    assert len(shapes) == len(uniq)
    return shapes, inverse


def shape_segments(shape: RankShape) -> RankSegments:
    """The segments a shape stands for: each decode group's requests at its mean context (no
    shorter than their new tokens), each chunk as it is."""
    q: list[float] = []
    k: list[float] = []
    path: list[int] = []
    samples: list[bool] = []
    n_dec = 0
    for p, width, n, b in shape.decode:
        q += [float(width)] * n
        k += [max(centre(b) / n, float(width))] * n
        path += [p] * n
        samples += [True] * n
        n_dec += n
    for p, new, context, smp in shape.chunks:
        q.append(float(new))
        k.append(float(context))
        path.append(p)
        samples.append(smp)
    is_decode = np.zeros(len(q), dtype=bool)
    is_decode[:n_dec] = True
    return RankSegments(
        q=np.asarray(q, dtype=np.float64),
        k=np.asarray(k, dtype=np.float64),
        is_decode=is_decode,
        path=np.asarray(path, dtype=np.int8),
        samples=np.asarray(samples, dtype=bool),
    )
