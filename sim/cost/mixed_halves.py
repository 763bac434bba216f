"""A rank's `MixedShape` split into its two two-batch-overlap micro-batches, and the segments a
shape stands for.

`halves` splits a shape at the level of its decode groups and chunks, each side rounded again
as `sim.cost.mixed_shape` rounds a rank's step; `halves_by_segments` splits the segments one
request at a time, the definition `halves` is tested against (`tests/cost/test_halves.py`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from sim.cost.dispatch import EXPAND, EXPAND_CHUNKED
from sim.cost.layer_ops import RankSegments
from sim.cost.memo import round_to_bucket
from sim.cost.micro_batches import TBO_TOKEN_DISTRIBUTION_THRESHOLD, balanced_index, split_in_two
from sim.cost.mixed_shape import Chunk, DecodeGroup, MixedShape


def halves(shape: MixedShape) -> tuple[MixedShape, MixedShape]:
    """The shape's two two-batch-overlap micro-batches (`sim.cost.micro_batches.split_in_two`
    of the segments it stands for), each rounded again: `halves_by_segments`, split at the
    level of the shape's decode groups instead of one request at a time, the same shapes to
    the last bit (`tests/cost/test_halves.py`). A split's sides are runs of the segments in
    the order it reads them (the chunks, then the decode requests by context), so each side's
    sums are of the same values in the same order."""
    if not shape.chunks:
        return halves_by_segments(shape)
    # the order split_in_two reads: chunks as listed, then decode groups by context (stable)
    groups = sorted(shape.decode, key=lambda g: g[3])
    n = [g[2] for g in groups]
    c_path, c_q, c_k, _ = zip(*shape.chunks, strict=True)
    lens = np.concatenate([np.asarray(c_q, dtype=np.float64), np.repeat([g[1] for g in groups], n)])
    ks = np.concatenate([np.asarray(c_k, dtype=np.float64), np.repeat([g[3] for g in groups], n)])
    paths = np.concatenate(
        [np.asarray(c_path, dtype=np.int8), np.repeat([g[0] for g in groups], n)]
    )
    paths = paths.astype(np.int8, copy=False)
    chunks = [(int(p), float(q), float(k), bool(x)) for p, q, k, x in shape.chunks]
    n_chunks = len(chunks)
    cum = np.cumsum(lens)
    total = float(cum[-1])
    cut = balanced_index(cum, total)
    left = float(cum[cut - 1]) if cut > 0 else 0.0
    t = TBO_TOKEN_DISTRIBUTION_THRESHOLD
    sides = _Sides(groups, chunks, lens, ks, paths)
    if t * total <= left <= (1.0 - t) * total:
        return sides.run(0, cut), sides.run(cut, len(lens))
    # two-chunk split at the token midpoint: the straddling segment is cut in two
    half = float(np.floor(total / 2))
    j = int(np.searchsorted(cum, half, side="right"))  # first segment ending past the midpoint
    before = float(cum[j - 1]) if j > 0 else 0.0
    first_q = half - before
    if first_q <= 0 or j >= n_chunks:  # the midpoint falls between segments (or in a token)
        return sides.run(0, j), sides.run(j, len(lens))
    p, q, k, smp = chunks[j]
    second_q = q - first_q
    return (
        sides.run(0, j, after=(p, first_q, k - second_q, False)),
        sides.run(j + 1, len(lens), before=(p, second_q, k, smp)),
    )


class _Sides:
    """The sides of a split of a shape's segments, as runs of positions in the split's order
    (`halves`): `lens`, `ks`, `paths` of every position; the chunks at the first positions,
    then the decode groups' requests (`groups`, by context)."""

    def __init__(
        self,
        groups: list[DecodeGroup],
        chunks: list[Chunk],
        lens: NDArray[np.float64],
        ks: NDArray[np.float64],
        paths: NDArray[np.int8],
    ) -> None:
        self.groups, self.chunks, self.lens, self.ks, self.paths = groups, chunks, lens, ks, paths

    def run(
        self, a: int, b: int, before: Chunk | None = None, after: Chunk | None = None
    ) -> MixedShape:
        """The side holding positions a..b-1, a piece of a cut chunk `before` or `after` them."""
        c = len(self.chunks)
        chunks = self.chunks[min(a, c) : min(b, c)]
        counts: dict[tuple[int, float, float], int] = {}
        start = c
        for p, w, n, ctx in self.groups:  # each group's requests that fall in the run
            inside = min(b, start + n) - max(a, start)
            if inside > 0:
                key = (int(p), float(w), float(ctx))
                counts[key] = counts.get(key, 0) + inside
            start += n
        q, k, path = self.lens[a:b], self.ks[a:b], self.paths[a:b]
        if before is not None or after is not None:  # the piece's segment joins the arrays
            piece = before if before is not None else after
            assert piece is not None
            one = (np.array([piece[1]]), np.array([piece[2]]), np.array([piece[0]], dtype=np.int8))
            if before is not None:
                chunks = [before, *chunks]
                q, k, path = (
                    np.concatenate([x, y]) for x, y in zip(one, (q, k, path), strict=True)
                )
            else:
                chunks = [*chunks, piece]
                q, k, path = (
                    np.concatenate([y, x]) for x, y in zip(one, (q, k, path), strict=True)
                )
        decode_q = self.lens[max(a, c) : b]
        expand = (path == EXPAND) | (path == EXPAND_CHUNKED)
        return MixedShape(
            decode=tuple((p, w, n, ctx) for (p, w, ctx), n in sorted(counts.items())),
            chunks=tuple(chunks),
            tokens=float(q.sum()),
            expanded=round_to_bucket(float(k[expand].sum())),
            rows=float(decode_q.sum()) + float(sum(1 for ch in chunks if ch[3])),
        )


def halves_by_segments(shape: MixedShape) -> tuple[MixedShape, MixedShape]:
    """`halves` by way of the segments the shape stands for, one request at a time."""
    out = []
    for part in split_in_two(mixed_segments(shape)):
        dec = part.is_decode
        groups: dict[tuple[int, float, float], int] = {}
        requests = (part.path[dec].tolist(), part.q[dec].tolist(), part.k[dec].tolist())
        for p, w, k in zip(*requests, strict=True):
            groups[(p, w, k)] = groups.get((p, w, k), 0) + 1
        smp = np.ones(len(part.q), dtype=bool) if part.samples is None else part.samples
        pre = ~dec
        columns = (part.path[pre], part.q[pre], part.k[pre], smp[pre])
        chunks = tuple(zip(*(c.tolist() for c in columns), strict=True))
        expand = (part.path == EXPAND) | (part.path == EXPAND_CHUNKED)
        out.append(
            MixedShape(
                decode=tuple((p, w, n, k) for (p, w, k), n in sorted(groups.items())),
                chunks=chunks,
                tokens=part.tokens,
                expanded=round_to_bucket(float(part.k[expand].sum())),
                rows=float(part.q[dec].sum()) + float(np.count_nonzero(pre & smp)),
            )
        )
    return out[0], out[1]


def mixed_segments(shape: MixedShape) -> RankSegments:
    """The segments a shape stands for: decode groups' requests at their common context, then
    the chunks."""
    q: list[float] = []
    k: list[float] = []
    path: list[int] = []
    samples: list[bool] = []
    for p, w, n, ctx in shape.decode:
        q += [w] * n
        k += [ctx] * n
        path += [p] * n
        samples += [True] * n
    n_dec = len(q)
    for p, new, ctx, smp in shape.chunks:
        q.append(new)
        k.append(ctx)
        path.append(p)
        samples.append(smp)
    return RankSegments(
        q=np.asarray(q, dtype=np.float64),
        k=np.asarray(k, dtype=np.float64),
        is_decode=np.arange(len(q)) < n_dec,
        path=np.asarray(path, dtype=np.int8),
        samples=np.asarray(samples, dtype=bool),
    )
