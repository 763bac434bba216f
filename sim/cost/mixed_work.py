"""A chunk rank's work as a weighted sum of memoised parts (`sim.cost.mixed_rank` prices the
parts): each `Part` with its ops, total and MoE-layer share, their sum as a `MixedWork`, and the
weights that interpolate a part priced at bucket centres to the rank's own tokens (`between`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache

from sim.cost.memo import BUCKETS_PER_OCTAVE, centre
from sim.cost.rank_work import Ops, weighted_merge


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
