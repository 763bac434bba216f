"""A rank's step work with prompt chunks as the keys its memoised parts are priced at.

A decode-only rank is shaped as a `RankShape` (`sim.cost.rank_shape`), whose whole work repeats
from step to step. A rank running prefill chunks is shaped as a `MixedShape`: its decode groups
(as a `RankShape` keeps them: path, width, count and context-sum bucket), its chunks, its tokens,
the cached tokens its expand-path chunks up-project (rounded to 2^(1/16) buckets) and its
logits rows; `sim.cost.mixed_rank` prices it from parts keyed by a few of these each.

A chunk keeps its path and whether it samples; its length and (non-zero) prefix are rounded to
2^(1/64) buckets (within 0.54%, its attention within 1.1%: pairs grow with the square of its
tokens). A finer bucket than elsewhere, because a prompt of one length (a fixed-length
benchmark) rounds the same way every step: at 2^(1/16) a 2,000-token prompt is priced as
1,961 (-1.9%, its attention -3.8%), at 2^(1/64) as 2,004 (+0.2%). The rank's tokens are kept
exactly (its token-level work is interpolated between buckets, `sim.cost.mixed_rank`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from sim.cost.batch import BatchShape, all_equal
from sim.cost.decode_sums import DecodeSums
from sim.cost.dispatch import EXPAND, EXPAND_CHUNKED
from sim.cost.memo import bucket, buckets, centre, centres, round_to_bucket
from sim.cost.rank_shape import RankShape

# a chunk's length and prefix: 2^(1/64) buckets (within 0.54%), as its attention grows with the
# square of its tokens and a prompt of one length rounds the same way every step
CHUNK_BUCKETS_PER_OCTAVE = 64
# a step (or a one-rank step, `_one_rank`) with at most this many chunks rounds them one at a
# time, in scalar arithmetic: a saturated EP144 colocated step brings up to ~30, which the
# array path took ~8 us a step longer to round (its later half replayed, the same rounding)
FEW_CHUNKS = 32

DecodeGroup = tuple[int, float, int, float]  # path, new tokens each, requests, context each
Chunk = tuple[int, float, float, bool]  # path, new tokens, context, samples a token
# the MLA paths of segments (q, k, is_decode), with each one's batch (None: all one batch)
Paths = Callable[
    [NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_], NDArray[np.int64] | None],
    NDArray[np.int8],
]
# the one MLA path of decode segments (q, k, is_decode all true), or None where they differ
DecodePath = Callable[[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]], int | None]


class MixedShape(NamedTuple):
    """A rank's step work with prompt chunks, rounded: what each of its parts is priced at."""

    decode: tuple[DecodeGroup, ...]
    chunks: tuple[Chunk, ...]
    tokens: float  # the rank's tokens (its token-level work is interpolated between buckets)
    expanded: float  # cached tokens its expand-path chunks up-project, rounded (0: none)
    rows: float  # logits rows: decode tokens and chunks that complete their prompt

    @property
    def chunk_work(self) -> tuple[float, float, float]:
        """The chunks' tokens (rounded), expanded tokens (rounded, as `expanded`) and the
        ones completing their prompt: what the MTP extend's token-level work depends on."""
        if len(self.chunks) == 1:  # nearly every chunk rank: the same figures, no generators
            ((_, new, _, samples),) = self.chunks
            return round_to_bucket(new), self.expanded, 1.0 if samples else 0.0
        tokens = round_to_bucket(sum(c[1] for c in self.chunks))
        return tokens, self.expanded, float(sum(1 for c in self.chunks if c[3]))


Shape = RankShape | MixedShape  # a rank's step work: decode-only, or with prompt chunks


# remembered: a step's chunk ranks repeat a few hundred (requests, context bucket) pairs
@lru_cache(maxsize=4096)
def decode_group(path: int, width: int, requests: int, context_bucket: int) -> DecodeGroup:
    """A `RankShape` decode group as its requests' common context (no shorter than their new
    tokens), as `rank_shape.shape_segments` spells them out."""
    return (path, float(width), requests, max(centre(context_bucket) / requests, float(width)))


@lru_cache(maxsize=4096)
def _one_group(path: int, width: int, requests: int, context_bucket: int) -> tuple[DecodeGroup]:
    """A rank's decode side of one group (`decode_group`) as its shape holds it, remembered: a
    step's shapes then hold the very key their part is stored under, which a dict finds by
    identity, without comparing it."""
    return (decode_group(path, width, requests, context_bucket),)


def mixed_shapes(
    batch: BatchShape,
    mixed: NDArray[np.bool_],
    ranks: list[int],
    paths: Paths,
    tokens_r: NDArray[np.float64],
    sums: DecodeSums | None = None,
) -> list[MixedShape]:
    """The shapes of `ranks` (those `mixed`: each running a chunk), in that order, vectorised
    over ranks, the MLA paths too (`paths` of segments and the batch each is in): decode
    segments' are decided one by one, as every policy does; each rank's chunks together
    (SGLang picks one path for a rank's extend batch), from its chunks alone. `tokens_r`:
    every rank's tokens; `sums`: the step's decode side, where counted already
    (`sim.cost.decode_sums`: its decode groups come from it, no segment selected)."""
    if sums is not None:
        return _from_sums(batch, ranks, paths, tokens_r, sums)
    if len(ranks) == 1:
        return [_one_rank(batch, mixed, ranks[0], paths, float(tokens_r[ranks[0]]))]
    rank, q, k, dec = batch.rank, batch.new_tokens, batch.kv_tokens, batch.is_decode
    on = (dec & mixed[rank]).nonzero()[0]  # the mixed ranks' decode segments, selected once
    r_on, q_on, k_on_int = rank[on], q[on], k[on]
    decode_path = paths(q_on, k_on_int, np.ones(on.shape[0], dtype=bool), None)
    pre = (~dec).nonzero()[0]
    pos = np.full(batch.num_ranks, -1, dtype=np.int64)
    pos[ranks] = np.arange(len(ranks))
    chunk_path = paths(q[pre], k[pre], dec[pre], pos[rank[pre]])  # each rank's an extend batch
    m = batch.num_ranks
    groups: list[list[DecodeGroup]] = [[] for _ in ranks]
    if r_on.size:  # decode groups by rank, path and width, as `rank_shape` keeps them
        k_on = k_on_int.astype(np.float64)
        width, path = int(q_on[0]), int(decode_path[0])
        if (q_on == width).all() and (decode_path == path).all():  # one group per rank
            count = np.bincount(r_on, minlength=m)[ranks]
            busy = count.nonzero()[0]
            k_sum = np.bincount(r_on, weights=k_on, minlength=m)[ranks][busy]
            per_rank = (busy.tolist(), count[busy].tolist(), buckets(k_sum.astype(np.float64)))
            for i, n, bk in zip(per_rank[0], per_rank[1], per_rank[2].tolist(), strict=True):
                groups[i].append(decode_group(path, width, n, bk))
        else:
            code = r_on << 40 | decode_path.astype(np.int64) << 32 | q_on
            kinds, inverse = np.unique(code, return_inverse=True)
            n_kind = np.bincount(inverse)
            b = buckets(np.bincount(inverse, weights=k_on).astype(np.float64))
            for kind, n, bk in zip(kinds.tolist(), n_kind.tolist(), b.tolist(), strict=True):
                group = decode_group((kind >> 32) & 0xFF, kind & 0xFFFFFFFF, n, bk)
                groups[int(pos[kind >> 40])].append(group)
    rows = np.bincount(r_on, weights=q_on.astype(np.float64), minlength=m).astype(np.float64)
    return _with_chunks(batch, ranks, pre, pos, chunk_path, groups, rows, tokens_r)


def _from_sums(
    batch: BatchShape,
    ranks: list[int],
    paths: Paths,
    tokens_r: NDArray[np.float64],
    sums: DecodeSums,
) -> list[MixedShape]:
    """`mixed_shapes` of a step whose decode side is counted (`sums`): each rank's one decode
    group from its count and context sum, as the selecting path groups them."""
    pre = slice(sums.n, None)  # the chunks: every segment after the decode ones
    rank, q, k, dec = batch.rank, batch.new_tokens, batch.kv_tokens, batch.is_decode
    pos = np.full(batch.num_ranks, -1, dtype=np.int64)
    pos[ranks] = np.arange(len(ranks))
    chunk_path = paths(q[pre], k[pre], dec[pre], pos[rank[pre]])  # each rank's an extend batch
    groups: list[tuple[DecodeGroup, ...]] = [() for _ in ranks]
    count = sums.requests[ranks]
    busy = count.nonzero()[0]
    per_rank = (busy.tolist(), count[busy].tolist(), buckets(sums.kv_sum[ranks][busy]).tolist())
    for i, n, b in zip(*per_rank, strict=True):
        groups[i] = _one_group(sums.path, sums.width, n, b)
    return _with_chunks(batch, ranks, pre, pos, chunk_path, groups, sums.tokens, tokens_r)


def _with_chunks(
    batch: BatchShape,
    ranks: list[int],
    pre: NDArray[np.intp] | slice,
    pos: NDArray[np.int64],
    chunk_path: NDArray[np.int8],
    groups: Sequence[Sequence[DecodeGroup]],
    decode_rows: NDArray[np.float64],
    tokens_r: NDArray[np.float64],
) -> list[MixedShape]:
    """The shapes of `ranks`, from their decode `groups` and every rank's decode logits rows
    (`decode_rows`), with the chunks (segments `pre`, on MLA paths `chunk_path`; `pos`: each
    rank's place in `ranks`) and the rest of each shape added."""
    cr, cq, ck = batch.rank[pre], batch.new_tokens[pre], batch.kv_tokens[pre]
    smp = np.ones(cq.size, dtype=bool) if batch.samples_token is None else batch.samples_token[pre]
    t = tokens_r[ranks].astype(np.float64).tolist()
    if cq.size <= FEW_CHUNKS:
        columns = (pos[cr].tolist(), chunk_path.tolist(), cq.tolist(), ck.tolist(), smp.tolist())
        chunks, x, sampled = _few_chunks(len(ranks), *columns)
    else:
        chunks, x, sampled = _many_chunks(batch.num_ranks, ranks, pos, cr, chunk_path, cq, ck, smp)
    rows = [d + n for d, n in zip(decode_rows[ranks].tolist(), sampled, strict=True)]
    return [
        MixedShape(tuple(g), tuple(sorted(c)), ti, xi, ri)
        for g, c, ti, xi, ri in zip(groups, chunks, t, x, rows, strict=True)
    ]


def _few_chunks(
    n: int, where: list[int], paths: list[int], q: list[int], k: list[int], smp: list[bool]
) -> tuple[list[list[Chunk]], list[float], list[float]]:
    """A step's few chunks (at most `FEW_CHUNKS`), in scalar arithmetic where numpy's per-call
    cost would be most of the work: chunk i (on MLA path `paths[i]`, `q[i]` new tokens of
    context `k[i]`, sampling a token if `smp[i]`) goes to the shape at place `where[i]` of `n`.
    (each place's chunks, its expanded context rounded as `_rounded` does, its chunks that
    sample). Sums are of whole tokens: exact, as the vectorised sums are."""
    chunks: list[list[Chunk]] = [[] for _ in range(n)]
    expanded, sampled = [0] * n, [0.0] * n
    for i, p, nq, ctx, s in zip(where, paths, q, k, smp, strict=True):
        chunks[i].append((p, *_rounded_chunk(nq, ctx), s))
        if p in (EXPAND, EXPAND_CHUNKED):
            expanded[i] += ctx
        sampled[i] += s
    x = [centre(bucket(float(v))) if v > 0 else 0.0 for v in expanded]
    return chunks, x, sampled


def _many_chunks(
    m: int,
    ranks: list[int],
    pos: NDArray[np.int64],
    cr: NDArray[np.int64],
    chunk_path: NDArray[np.int8],
    cq: NDArray[np.int64],
    ck: NDArray[np.int64],
    smp: NDArray[np.bool_],
) -> tuple[list[list[Chunk]], list[float], list[float]]:
    """`_few_chunks` of many chunks, vectorised over them (`cr`: each chunk's rank of `m`;
    `pos`: each rank's place in `ranks`)."""
    new, context = _rounded_chunks(cq, ck)
    chunks: list[list[Chunk]] = [[] for _ in ranks]
    columns = (pos[cr].tolist(), chunk_path.tolist(), new.tolist(), context.tolist(), smp.tolist())
    for i, p, nq, ctx, s in zip(*columns, strict=True):
        chunks[i].append((p, nq, ctx, s))
    expand = (chunk_path == EXPAND) | (chunk_path == EXPAND_CHUNKED)
    weights = np.where(expand, ck, 0).astype(np.float64)
    expanded = np.bincount(cr, weights=weights, minlength=m).astype(np.float64)
    sampled = np.bincount(cr, weights=smp.astype(np.float64), minlength=m)[ranks]
    x: list[float] = _rounded(expanded[ranks]).tolist()
    return chunks, x, sampled.tolist()


def _one_rank(
    batch: BatchShape, mixed: NDArray[np.bool_], r: int, paths: Paths, tokens: float
) -> MixedShape:
    """`mixed_shapes` of the one rank `r`, as it gives them, in fewer numpy calls (the app's
    tensor-parallel deployments are one rank). One `paths` call prices the rank's forward
    batch: every policy decides decode segments one by one and the extend batch from its
    chunks alone. Sums are of whole tokens, so exact in float64 whatever their order."""
    sel = mixed[batch.rank] if batch.num_ranks > 1 else slice(None)
    q, k, dec = batch.new_tokens[sel], batch.kv_tokens[sel], batch.is_decode[sel]
    path = paths(q, k, dec, None)
    pre = ~dec
    groups: tuple[DecodeGroup, ...] = ()
    q_on, p_on = q[dec], path[dec]
    if q_on.size and all_equal(q_on) and all_equal(p_on):  # one group
        k_sum = float(np.add.reduce(k[dec]))
        groups = (decode_group(int(p_on[0]), int(q_on[0]), q_on.size, bucket(k_sum)),)
    elif q_on.size:  # decode groups by path and width, as `rank_shape` keeps them
        code = p_on.astype(np.int64) << 32 | q_on
        kinds, inverse, n_kind = np.unique(code, return_inverse=True, return_counts=True)
        b = buckets(np.bincount(inverse, weights=k[dec].astype(np.float64)).astype(np.float64))
        groups = tuple(
            decode_group(kind >> 32 & 0xFF, kind & 0xFFFFFFFF, n, bk)
            for kind, n, bk in zip(kinds.tolist(), n_kind.tolist(), b.tolist(), strict=True)
        )
    cq, ck, chunk_path = q[pre], k[pre], path[pre]
    samples = batch.samples_token
    smp = np.ones(cq.size, dtype=bool) if samples is None else samples[sel][pre]
    if cq.size <= FEW_CHUNKS:
        columns = ([0] * cq.size, chunk_path.tolist(), cq.tolist(), ck.tolist(), smp.tolist())
        chunks, x, sampled = _few_chunks(1, *columns)
    else:
        on = np.zeros(cq.size, dtype=np.int64)  # every chunk on the one rank, at place 0
        chunks, x, sampled = _many_chunks(1, [0], on, on, chunk_path, cq, ck, smp)
    rows = float(np.add.reduce(q_on)) + sampled[0]
    return MixedShape(groups, tuple(sorted(chunks[0])), tokens, x[0], rows)


# remembered: prompts of one length chunk alike step after step (the app's default What-if
# rounds a handful of chunks in most of its steps)
@lru_cache(maxsize=4096)
def _rounded_chunk(q: int, k: int) -> tuple[float, float]:
    """`_rounded_chunks` of one chunk (`q` new tokens, `k` context) in scalar arithmetic: the
    same buckets and centres, the same sum."""
    fine = CHUNK_BUCKETS_PER_OCTAVE
    new = centre(bucket(float(q), fine), fine)
    prefix = float(k - q)
    return new, new + (centre(bucket(prefix, fine), fine) if prefix > 0 else prefix)


def _rounded_chunks(
    q: NDArray[np.int64], k: NDArray[np.int64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Chunks' new tokens and contexts, their lengths and (non-zero) prefixes at their
    2^(1/64) bucket centres."""
    fine = CHUNK_BUCKETS_PER_OCTAVE
    new = centres(buckets(q.astype(np.float64), fine), fine)
    prefix = (k - q).astype(np.float64)
    has = prefix > 0
    prefix[has] = centres(buckets(prefix[has], fine), fine)
    return new, new + prefix


def _rounded(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Positive values at their bucket centres, 0 kept."""
    out = np.zeros(x.shape)
    live = x > 0
    out[live] = centres(buckets(x[live]))
    return out
