"""A rank running prompt chunks, priced from memoised parts, each keyed by a few numbers.

A decode-only rank's work repeats from step to step at its `RankShape` (`sim.cost.rank_shape`).
A rank with prefill chunks rarely does: its chunks' lengths and prefixes, its decode requests
and its token total vary together, so a memo of whole ranks never hits and every such rank was
priced op by op, twice more for its two-batch-overlap halves. Its work is therefore priced in
parts (`sim.cost.rank_work.rank_parts`, `rank_ops` op for op), each memoised on its own key
from its `MixedShape` (`sim.cost.mixed_shape`, rounded before pricing):

- the token-level ops (projections, router, shared experts, dense MLP, TP all-reduce) and the
  memory-bound kernels at the rank's tokens, interpolated linearly between the two 2^(1/16)
  bucket centres around them (exact at a centre; a part's price is smooth in tokens, so the
  interpolation error is second order where rounding's would be first), the kernels also at
  the cached tokens the expand-path chunks up-project; its lm_head at its logits rows;
- its decode requests' attention and MTP draft passes at their decode groups;
- its chunks' attention and the MTP module's attention layer over them at the chunks (path,
  rounded length and prefix, whether each samples); the rest of the MTP module's extend at
  the chunks' tokens (rounded), expanded tokens and completed prompts.

Each part is a pure function of its key, so a step's price stays a function of its batch alone.
Against pricing every chunk rank op by op at its exact segments, steps of random mixed batches
come within 0.6% (ranks within 0.7%, mean -0.01%: `tests/cost/test_mixed_rank.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, cast

from sim.cost.chunk_parts import chunk_parts
from sim.cost.kernel_parts import kernel_parts
from sim.cost.layer_ops import RankContext, RankSegments
from sim.cost.memo import BoundedCache
from sim.cost.mixed_halves import halves, mixed_segments
from sim.cost.mixed_shape import Chunk, MixedShape
from sim.cost.mixed_work import MixedWork, Part, PartSeconds, between
from sim.cost.overlap import moe_layers_s
from sim.cost.pricing import Pricer
from sim.cost.rank_work import (
    Ops,
    chunk_attention_ops,
    chunk_ops,
    chunk_token_ops,
    decode_attention_ops,
    decode_ops,
    elementwise_ops,
    head_ops,
    token_ops,
)
from sim.cost.rate import OpTime, total_seconds
from sim.specs.deployment import Deployment
from sim.specs.gpu import GpuSpec

PART_MEMO_ENTRIES = 50_000
# a step's split shapes, kept until their halves are priced (and for the shapes that repeat)
SPLIT_MEMO_ENTRIES = 4_096


class MixedRanks:
    """Prices `MixedShape`s for one deployment, each part memoised by its own key."""

    def __init__(self, pr: Pricer, ctx: RankContext, d: Deployment, gpu: GpuSpec) -> None:
        self.pr, self.ctx, self.d, self.gpu = pr, ctx, d, gpu
        self._parts: BoundedCache[tuple[object, ...], Part] = BoundedCache(PART_MEMO_ENTRIES)
        self._halves: BoundedCache[tuple[object, ...], tuple[float, float]] = BoundedCache(
            PART_MEMO_ENTRIES
        )
        # whole shapes: a prompt of one length at a similar decode batch repeats its shape
        # (the app's default What-if: 113 distinct shapes in 568 chunk ranks on TP8, 23 in 570
        # on DP8), and its work is a pure function of it
        self._works: BoundedCache[MixedShape, MixedWork] = BoundedCache(PART_MEMO_ENTRIES)
        # each shape's two micro-batches, by its decode groups and chunks (`halves`)
        self._splits: BoundedCache[tuple[object, ...], tuple[MixedShape, MixedShape]] = (
            BoundedCache(SPLIT_MEMO_ENTRIES)
        )
        # pieces of parts keyed by what sets them (`layer_ops.Memo`): the MTP passes' kernels
        self._pieces: BoundedCache[tuple[object, ...], OpTime] = BoundedCache(PART_MEMO_ENTRIES)
        # each part's seconds by kind, for `seconds` (plain dicts: no recency to keep)
        self._part_s = PartSeconds()

    def works(self, shapes: Sequence[MixedShape]) -> list[MixedWork]:
        """`work` of each of `shapes` (a step's ranks with chunks, in order), each shape hashed
        once and each new one's parts looked up once. Where there are several shapes, the chunk
        sets and kernel parts the new ones lack are priced together, as arrays, where that is
        exact (`sim.cost.chunk_parts`, `sim.cost.kernel_parts`); the rest one by one. The same
        parts either way."""
        # plain loops, not comprehensions: a step has a few shapes, a call costs more than each
        find = self._works.find
        found: list[MixedWork | None] = []
        new: list[MixedShape] = []
        for shape in shapes:
            w = find(shape)
            found.append(w)
            if w is None:
                new.append(shape)
        if not new:
            return cast(list[MixedWork], found)
        wanted: list[tuple[list[tuple[Any, ...]], list[float]]] = []
        parts: list[list[Part | None]] = []
        for shape in new:
            keys, weights = self._keys(shape)
            wanted.append((keys, weights))
            parts.append(self._parts.find_many(keys))
        together = len(shapes) > 1 and self._price_missing(new, wanted, parts)
        k = 0  # the new shapes' place among them
        for j, w in enumerate(found):
            if w is None:
                keys, weights = wanted[k]
                got = parts[k]
                if together or k:  # parts stored since they were looked up: found, not priced
                    self._refresh(keys, got)
                found[j] = self._assemble(new[k], keys, weights, got)
                k += 1
        return cast(list[MixedWork], found)

    def seconds(self, shapes: Sequence[MixedShape]) -> list[float]:
        """`work(shape).seconds` of each of `shapes`: its parts' seconds added in the order
        `_assemble` adds them (`PartSeconds.of`: the same float) where each part was priced
        before; the shapes with a part not priced yet go through `works`, which prices it. A
        step run whole needs no other chunk rank's work (`ServingCostModel`), so most shapes
        are never assembled."""
        of = self._part_s.of
        out: list[float] = []
        lacking: list[int] = []
        for i, shape in enumerate(shapes):
            try:
                out.append(of(shape))
            except KeyError:
                lacking.append(i)
                out.append(0.0)
        if lacking:
            if len(self._part_s) > PART_MEMO_ENTRIES:  # values of their keys alone: refilled
                self._part_s.clear()
            new = [shapes[i] for i in lacking]
            for i, shape, work in zip(lacking, new, self.works(new), strict=True):
                self._part_s.store(self._keys(shape)[0], work.parts)
                out[i] = work.seconds
        return out

    def _refresh(self, keys: list[tuple[Any, ...]], got: list[Part | None]) -> None:
        """Look up again the parts of `keys` missing from `got`, in place: priced together, or
        by an earlier shape of the same step that shares them (a bucket's token-level parts,
        a decode group, a head)."""
        stored = self._parts.find
        for i, part in enumerate(got):
            if part is None:
                got[i] = stored(keys[i])

    def _price_missing(
        self,
        shapes: list[MixedShape],
        wanted: list[tuple[list[tuple[Any, ...]], list[float]]],
        parts: list[list[Part | None]],
    ) -> bool:
        """Price together the chunk sets and kernel parts `shapes` lack (`parts` as looked up
        for `wanted`'s keys), where that is exact; whether any was priced."""
        chunk_sets: dict[tuple[object, ...], tuple[Chunk, ...]] = {}
        kernels: dict[tuple[object, ...], tuple[float, float]] = {}
        for shape, (keys, _), got in zip(shapes, wanted, parts, strict=True):
            for key, part in zip(keys, got, strict=True):
                if part is None and key[0] == "chunks":
                    chunk_sets[key] = shape.chunks
                elif part is None and key[0] == "elementwise":
                    kernels[key] = (key[1], key[2])
        stored = self._price_together(chunk_sets, attention_only=False)
        return self._price_kernels_together(kernels) + stored > 0

    def prime_halves(self, shapes: Sequence[MixedShape]) -> None:
        """For `halves_moe_s` of `shapes`: the chunk attention of each one's two micro-batches
        that the memo lacks, priced all at once where that is exact (as `works` prices a
        step's new chunk sets)."""
        missing: dict[tuple[object, ...], tuple[Chunk, ...]] = {}
        kernels: dict[tuple[object, ...], tuple[float, float]] = {}
        for shape in shapes:
            if (shape.decode, shape.chunks) in self._halves:
                continue
            for half in self._split(shape):
                wanted: tuple[object, ...] = ("chunk attention", half.chunks)
                if half.chunks and wanted not in self._parts:
                    missing[wanted] = half.chunks
                self._missing_kernels(half, kernels)
        self._price_together(missing, attention_only=True)
        self._price_kernels_together(kernels)

    def _missing_kernels(
        self, shape: MixedShape, into: dict[tuple[object, ...], tuple[float, float]]
    ) -> None:
        """Add the memory-bound kernel parts `_token_keys` names for `shape` and the memo
        lacks, by key: (tokens at a bucket centre, expanded tokens)."""
        for _, t in between(shape.tokens):
            key: tuple[object, ...] = ("elementwise", t, shape.expanded)
            if key not in self._parts:
                into[key] = (t, shape.expanded)

    def _price_kernels_together(
        self, missing: dict[tuple[object, ...], tuple[float, float]]
    ) -> int:
        """Store the kernel parts `kernel_parts` prices exactly of the `missing` pairs; how
        many were stored."""
        if len(missing) < 2:  # one pair: kernel by kernel costs no more
            return 0
        keys = list(missing)
        priced = kernel_parts(self.pr, self.ctx, self.d.engine, [missing[k] for k in keys])
        return self._store(keys, priced)

    def _price_together(
        self, missing: dict[tuple[object, ...], tuple[Chunk, ...]], attention_only: bool
    ) -> int:
        """Store the parts `chunk_parts` prices exactly of the `missing` chunk sets (by key);
        how many were stored."""
        if len(missing) < 2:  # one set: op by op costs no more
            return 0
        keys: list[tuple[object, ...]] = list(missing)
        sets = [missing[k] for k in keys]
        return self._store(keys, chunk_parts(self.pr, self.ctx, self.d, sets, attention_only))

    def _store(self, keys: list[tuple[object, ...]], priced: list[Ops | None]) -> int:
        """Store the parts priced together (None: left to be priced one by one); how many."""
        stored = 0
        for key, ops in zip(keys, priced, strict=True):
            if ops is not None:
                moe_s = moe_layers_s(self.ctx.model, ops)
                self._parts.put(key, Part(ops, total_seconds(ops), moe_s))
                stored += 1
        return stored

    def work(self, shape: MixedShape) -> MixedWork:
        """The rank's work at `shape`: the sum of its parts, the token-level ones interpolated
        between the buckets around its tokens; memoised by the shape."""
        found = self._works.find(shape)
        return found if found is not None else self._work(shape)

    def _work(self, shape: MixedShape) -> MixedWork:
        keys, weights = self._keys(shape)
        return self._assemble(shape, keys, weights, self._parts.find_many(keys))

    def _keys(self, shape: MixedShape) -> tuple[list[tuple[Any, ...]], list[float]]:
        """The keys of `shape`'s parts, with each one's weight: its token-level parts
        (`_token_keys`), then its head, decode requests, chunks and the MTP module's
        token-level work over them."""
        keys, weights = self._token_keys(shape)
        keys += (("head", shape.rows), ("decode", shape.decode), ("chunks", shape.chunks))
        keys.append(("chunk tokens", *shape.chunk_work))
        weights += (1.0, 1.0, 1.0, 1.0)
        return keys, weights

    @staticmethod
    def _token_keys(shape: MixedShape) -> tuple[list[tuple[Any, ...]], list[float]]:
        """The keys of the token-level parts (projections, router, shared experts, dense MLP,
        TP all-reduce; the memory-bound kernels of a rank not all decode), each at a bucket
        centre around the rank's tokens, weighted to interpolate between them."""
        keys: list[tuple[Any, ...]] = []
        weights: list[float] = []
        for w, t in between(shape.tokens):
            keys += (("tokens", t), ("elementwise", t, shape.expanded))
            weights += (w, w)
        return keys, weights

    def _complete(
        self, shape: MixedShape, keys: list[tuple[Any, ...]], found: list[Part | None]
    ) -> list[Part]:
        """`found` (the parts of `keys` as looked up, None where missing) with the missing
        ones priced now, in place."""
        for i, p in enumerate(found):
            if p is None:
                found[i] = self._price_part(keys[i], shape)
        return cast(list[Part], found)

    def _assemble(
        self,
        shape: MixedShape,
        keys: list[tuple[Any, ...]],
        weights: list[float],
        found: list[Part | None],
    ) -> MixedWork:
        """`shape`'s work from its parts (`found`: as looked up, None where missing), the
        missing ones priced now; memoised by the shape."""
        parts = tuple(zip(weights, self._complete(shape, keys, found), strict=True))
        seconds = moe_s = 0.0  # the parts in order, as `sum` adds them
        for w, p in parts:
            seconds += w * p.seconds
            moe_s += w * p.moe_s
        work = MixedWork(parts=parts, seconds=seconds, moe_s=moe_s)
        self._works.put(shape, work)
        return work

    def _price_part(self, key: tuple[Any, ...], shape: MixedShape) -> Part:
        """The part of `shape` that `key` names (`_keys`, `moe_s`), priced and stored."""
        pr, c, d, kind = self.pr, self.ctx, self.d, key[0]
        if kind == "tokens":
            ops = token_ops(pr, c, d, self.gpu, key[1])
        elif kind == "elementwise":
            ops = elementwise_ops(pr, c, key[1], key[2], d.engine)
        elif kind == "head":
            ops = head_ops(pr, c, d, key[1])
        elif kind == "decode":
            ops = self._decode_ops(shape)
        elif kind == "chunks":
            ops = self._chunk_ops(shape)
        elif kind == "decode attention":
            ops = self._decode_attention(shape)
        elif kind == "chunk attention":
            ops = self._chunk_attention(shape)
        else:  # "chunk tokens"
            ops = chunk_token_ops(pr, c, d, key[1], key[2], key[3], self._pieces.get)
        priced = Part(ops, total_seconds(ops), moe_layers_s(c.model, ops))
        self._parts.put(key, priced)
        return priced

    def moe_s(self, shape: MixedShape) -> float:
        """`work(shape).moe_s` from the parts with work in the MoE layers alone: the head, the
        MTP passes (draft and extend) add none (`moe_layer_share` 0), so they are not priced
        (nor the chunk part's MTP layer: `chunk_attention_ops`). The same terms in the same
        order, less the zeros: the same float."""
        keys, weights = self._token_keys(shape)
        keys += (("decode attention", shape.decode), ("chunk attention", shape.chunks))
        weights += (1.0, 1.0)
        parts = self._complete(shape, keys, self._parts.find_many(keys))
        moe_s = 0.0
        for w, p in zip(weights, parts, strict=True):
            moe_s += w * p.moe_s
        return moe_s

    def halves_moe_s(self, shape: MixedShape) -> tuple[float, float]:
        """The rank's own work in the MoE layers of each of its two micro-batches."""

        def price() -> tuple[float, float]:
            first, second = self._split(shape)
            return self.moe_s(first), self.moe_s(second)

        # the halves are split from the shape's decode groups and chunks alone
        return self._halves.get((shape.decode, shape.chunks), price)

    def _split(self, shape: MixedShape) -> tuple[MixedShape, MixedShape]:
        """`halves(shape)`, memoised by what it depends on (`prime_halves` splits the shapes
        whose halves it prices, `halves_moe_s` then finds them)."""
        return self._splits.get((shape.decode, shape.chunks), partial(halves, shape))

    def _decode_ops(self, shape: MixedShape) -> Ops:
        return decode_ops(self.pr, self.ctx, self.d, self._decode(shape), self._pieces.get)

    def _chunk_ops(self, shape: MixedShape) -> Ops:
        return chunk_ops(self.pr, self.ctx, self.d, self._chunks(shape))

    def _decode_attention(self, shape: MixedShape) -> Ops:
        return decode_attention_ops(self.pr, self.ctx, self._decode(shape), self._pieces.get)

    def _chunk_attention(self, shape: MixedShape) -> Ops:
        return chunk_attention_ops(self.pr, self.ctx, self._chunks(shape))

    @staticmethod
    def _decode(shape: MixedShape) -> RankSegments:
        s = mixed_segments(MixedShape(shape.decode, (), 0.0, 0.0, 0.0))
        return RankSegments(q=s.q, k=s.k, is_decode=s.is_decode, path=s.path)

    @staticmethod
    def _chunks(shape: MixedShape) -> RankSegments:
        return mixed_segments(MixedShape((), shape.chunks, 0.0, 0.0, 0.0))
