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

from collections.abc import Callable
from typing import Generic, NamedTuple, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from sim.cost.batch import BatchShape
from sim.cost.layer_ops import RankSegments
from sim.cost.memo import bucket, buckets, centre

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
    dec = is_decode.nonzero()[0]
    if dec.size:
        code = path[dec].astype(np.int64) << 32 | q[dec]
        kinds, inverse = np.unique(code, return_inverse=True)
        n = np.bincount(inverse)
        sum_k = np.bincount(inverse, weights=k[dec].astype(np.float64)).astype(np.float64)
        columns = (kinds.tolist(), n.tolist(), buckets(sum_k).tolist())
        for kind, count, b in zip(*columns, strict=True):
            groups.append((kind >> 32, kind & 0xFFFFFFFF, count, b))
    pre = (~is_decode).nonzero()[0]
    chunks: list[Chunk] = []
    if pre.size:
        smp = np.ones(pre.size, dtype=bool) if samples is None else samples[pre]
        p_, q_, k_, s_ = path[pre].tolist(), q[pre].tolist(), k[pre].tolist(), smp.tolist()
        chunks = sorted(zip(p_, q_, k_, s_, strict=True))
    return RankShape(tuple(groups), tuple(chunks))


class _Priced(Protocol):
    @property
    def seconds(self) -> float: ...


W = TypeVar("W", bound=_Priced)

# a uniform decode rank's signature, one int64: path, width, requests, context-sum bucket
_BUCKET_BITS, _COUNT_BITS, _WIDTH_BITS = 24, 24, 8
_BUCKET_OFFSET = 1 << (_BUCKET_BITS - 1)  # buckets of sums below 1 are negative
FEW_RANKS = 16  # a step of at most this many decode ranks finds their slots in a dict


class DecodeTable(Generic[W]):
    """The work of decode-only ranks whose requests share one width and path, looked up for a
    whole step at once: each rank's shape (one decode group: path, width, count and
    context-sum bucket, as `rank_shape` keeps it) as one int64 signature, found by a binary
    search over the signatures met so far instead of building and hashing a tuple per rank. A
    signature met for the first time is shaped and priced by `price` (the caller's memo of
    whole shapes), so a rank's work is the same object that memo gives. Entries are only
    added; past `max_entries` the table starts again empty (its values are pure functions of
    their keys, so that only costs pricing them again)."""

    def __init__(self, price: Callable[[RankShape], W], max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries}")
        self._price, self.max_entries = price, max_entries
        self._clear()

    def _clear(self) -> None:
        self._keys = np.zeros(0, dtype=np.int64)  # sorted signatures
        self._at = np.zeros(0, dtype=np.intp)  # each sorted signature's slot
        self.shapes: list[RankShape] = []  # by slot
        self.works: list[W] = []
        self._seconds = np.zeros(0)  # by slot
        self._slot_of: dict[int, int] = {}  # each signature's slot, for a step of few ranks

    def __len__(self) -> int:
        return len(self.works)

    def ranks(
        self, batch: BatchShape, n_r: NDArray[np.int64], width: int, path: int
    ) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
        """Every rank's slot and own seconds (idle ranks: slot 0, 0 s) in a decode-only
        `batch` whose requests all have `width` new tokens and MLA `path`; `n_r`: its
        requests per rank."""
        ranks = batch.num_ranks
        if ranks == 1:
            return self._one_rank(batch, width, path)
        busy = n_r.nonzero()[0]
        # whole-token contexts: their float64 sums are exact, whatever the order
        kv_sum = np.bincount(batch.rank, weights=batch.kv_tokens, minlength=ranks)[busy].astype(
            np.float64, copy=False
        )
        slots, seconds = self.lookup(n_r[busy], kv_sum, width, path, batch.size)
        index = np.zeros(ranks, dtype=np.intp)
        index[busy] = slots
        rank_s = np.zeros(ranks)
        rank_s[busy] = seconds
        return index, rank_s

    def _one_rank(
        self, batch: BatchShape, width: int, path: int
    ) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
        """`ranks` of a one-rank unit (the tensor-parallel layouts), found by its shape's
        numbers in a dict: the same slot and seconds `lookup` gives, in scalar arithmetic."""
        slot = self._slot_of.get(_signature(*decode_signature(batch, width, path)))
        if slot is None:  # priced, and its signature kept, by `lookup`
            n, kv_sum = batch.size, float(np.add.reduce(batch.kv_tokens))
            slots, _ = self.lookup(np.array([n]), np.array([kv_sum]), width, path, n)
            slot = int(slots[0])
        return np.full(1, slot, dtype=np.intp), self._seconds[slot : slot + 1].copy()

    def lookup(
        self,
        n_r: NDArray[np.int64],
        kv_sum_r: NDArray[np.float64],
        width: int,
        path: int,
        total: int,
    ) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
        """Each rank's slot in `shapes` / `works` and its work's seconds, from its request
        count and context sum (all positive); `total`: the ranks' requests together (their
        counts' bound)."""
        if not (0 <= path < 128 and 0 < width < 1 << _WIDTH_BITS):
            raise ValueError(f"decode path {path} or width {width} outside the signature")
        if total >= 1 << _COUNT_BITS:  # so is every rank's count
            raise ValueError(f"{total} decode requests: a rank's count is outside the signature")
        # every finite float's bucket is within +-16 x 1,075 (2^-1074 to 2^1024): inside
        if n_r.shape[0] <= FEW_RANKS:  # signatures in Python ints, slots from a dict
            found = [
                self._slot_of.get(_signature(path, width, n, bucket(v)))
                for n, v in zip(n_r.tolist(), kv_sum_r.tolist(), strict=True)
            ]
            if None not in found:  # else priced below, as a step of many ranks adds them
                at = np.array(found, dtype=np.intp)
                return at, self._seconds[at]
        b = buckets(kv_sum_r)
        head = (path << _WIDTH_BITS | width) << (_COUNT_BITS + _BUCKET_BITS)
        sig = (n_r.astype(np.int64) << _BUCKET_BITS) | (b + (_BUCKET_OFFSET + head))
        pos = self._keys.searchsorted(sig)
        known = self._keys.shape[0]
        hit: NDArray[np.bool_] = np.zeros(sig.shape[0], dtype=bool)
        if known:
            hit = np.equal(self._keys[np.minimum(pos, known - 1)], sig)
        if np.count_nonzero(hit) < hit.shape[0]:
            miss = ~hit
            if len(self.works) + int(np.count_nonzero(miss)) > self.max_entries:
                self._clear()  # and every rank of this step is new again
                miss[:] = True
            self._add(sig[miss], n_r[miss], b[miss], width, path)
            pos = self._keys.searchsorted(sig)
        slots = self._at[pos]
        return slots, self._seconds[slots]

    def _add(
        self, sig: NDArray[np.int64], n: NDArray[np.int64], b: NDArray[np.int64], width: int,
        path: int,
    ) -> None:  # fmt: skip
        new, first = np.unique(sig, return_index=True)
        slot0 = len(self.works)
        for i in first.tolist():
            shape = RankShape(((path, width, int(n[i]), int(b[i])),))
            self.shapes.append(shape)
            self.works.append(self._price(shape))
        added = np.array([w.seconds for w in self.works[slot0:]])
        self._seconds = np.concatenate([self._seconds, added])
        slots = np.arange(slot0, len(self.works), dtype=np.intp)
        self._slot_of.update(zip(new.tolist(), slots.tolist(), strict=True))
        keys = np.concatenate([self._keys, new])
        at = np.concatenate([self._at, slots])
        order = np.argsort(keys, kind="stable")
        self._keys, self._at = keys[order], at[order]


def _signature(path: int, width: int, requests: int, context_bucket: int) -> int:
    """A uniform decode rank's signature in Python ints: what `DecodeTable.lookup` computes
    as int64 arrays for a step's many ranks."""
    head = (path << _WIDTH_BITS | width) << (_COUNT_BITS + _BUCKET_BITS)
    return (requests << _BUCKET_BITS) | (context_bucket + _BUCKET_OFFSET + head)


def decode_signature(batch: BatchShape, width: int, path: int) -> tuple[int, int, int, int]:
    """A one-rank decode step's `RankShape` as its numbers, in scalar arithmetic: (path,
    width, requests, context-sum bucket), every request `width` new tokens on `path`."""
    # whole-token contexts: the exact sum
    return (path, width, batch.size, bucket(float(np.add.reduce(batch.kv_tokens))))


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
