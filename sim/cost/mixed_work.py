"""A chunk rank's work as a weighted sum of memoised parts (`sim.cost.mixed_rank` prices the
parts): each `Part` with its ops, total and MoE-layer share, their sum as a `MixedWork`, and the
weights that interpolate a part priced at bucket centres to the rank's own tokens (`between`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any

from sim.cost.memo import BUCKETS_PER_OCTAVE, centre
from sim.cost.rank_work import Ops, weighted_merge

if TYPE_CHECKING:  # the shapes whose parts' seconds it adds
    from sim.cost.mixed_shape import MixedShape


@dataclass(frozen=True)
class Part:
    """One part's ops, their total and their share in the MoE layers (`moe_layers_s`)."""

    ops: Ops
    seconds: float
    moe_s: float


@dataclass(frozen=True)
class MixedWork:
    """A rank's work: the sum of its parts, each with its weight (an interpolated part is two
    parts at the buckets around it)."""

    parts: tuple[tuple[float, Part], ...]
    seconds: float
    moe_s: float

    @cached_property
    def ops(self) -> Ops:
        """The parts' ops merged by name, once per work (a step asks its critical rank's; a
        shape that repeats is the same work, `MixedRanks.work`). Callers must not change it."""
        return weighted_merge((w, p.ops) for w, p in self.parts)


# remembered: a step asks for a chunk rank's tokens more than once (`MixedRanks._keys`, then
# two-batch overlap's halves and the kernels they lack)
@lru_cache(maxsize=4096)
def between(x: float) -> tuple[tuple[float, float], ...]:
    """`x` as weights on the bucket centres around it (one centre when it is one; 0 stays
    0): linear interpolation, exact at the centres, and monotone between them where the
    priced work is."""
    if x <= 0:
        return ((1.0, 0.0),)
    lo = math.floor(math.log2(x) * BUCKETS_PER_OCTAVE)
    a, b = centre(lo), centre(lo + 1)
    if x <= a:
        return ((1.0, a),)
    if x >= b:
        return ((1.0, b),)
    w = (x - a) / (b - a)
    return ((1.0 - w, a), (w, b))


class PartSeconds:
    """Each priced part's seconds, by kind, keyed by what sets it (its `MixedRanks` key less
    the kind: a bucket centre, a decode group, a set of chunks), and a shape's seconds from
    them (`of`). Flat keys in one table per kind hash and compare in a fraction of the time
    of the tagged keys (`MixedRanks._keys`), most of what adding a step's chunk ranks from
    their parts cost."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        # tokens: token-level parts at a bucket centre; kernels: memory-bound kernels at a
        # centre and expanded tokens; head: at logits rows; decode: at decode groups; chunks:
        # at a set of chunks; chunk_tokens: the MTP extend's token-level work at its figures
        self.tokens: dict[float, float] = {}
        self.kernels: dict[tuple[float, float], float] = {}
        self.head: dict[float, float] = {}
        self.decode: dict[tuple[Any, ...], float] = {}
        self.chunks: dict[tuple[Any, ...], float] = {}
        self.chunk_tokens: dict[tuple[float, float, float], float] = {}
        self._tables: dict[str, dict[Any, float]] = {
            "tokens": self.tokens, "elementwise": self.kernels, "head": self.head,
            "decode": self.decode, "chunks": self.chunks, "chunk tokens": self.chunk_tokens,
        }  # fmt: skip

    def __len__(self) -> int:
        return sum(len(t) for t in self._tables.values())

    def store(self, keys: list[tuple[Any, ...]], parts: tuple[tuple[float, Part], ...]) -> None:
        """Keep the seconds of each part of a work (`parts`, as `MixedWork.parts`) under the
        key that names it (`keys`: its `MixedRanks._keys` keys, less the kind)."""
        tables = self._tables
        for key, (_, part) in zip(keys, parts, strict=True):
            tables[key[0]][key[1] if len(key) == 2 else key[1:]] = part.seconds

    def of(self, shape: MixedShape) -> float:
        """`shape`'s seconds: its parts' seconds, each weighted, added in the order
        `MixedRanks._assemble` adds them (the same float); KeyError where a part is not
        stored."""
        x, kernels, tokens = shape.expanded, self.kernels, self.tokens
        s = 0.0
        for w, t in between(shape.tokens):
            s += w * tokens[t]
            s += w * kernels[t, x]
        s += self.head[shape.rows]
        s += self.decode[shape.decode]
        s += self.chunks[shape.chunks]
        s += self.chunk_tokens[shape.chunk_work]
        return s
