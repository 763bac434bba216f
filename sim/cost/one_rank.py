"""A one-rank unit's steps (the tensor-parallel layouts) priced whole, memoised by the rank's
shape.

A one-rank step's whole price follows from its rank's shape: its own work, its loads (its
tokens, its decode tokens and requests, its chunks' tokens) and the second stream's share. A
decode step's shape is its `RankShape`'s numbers (`rank_shape.decode_signature`); a step with
prompt chunks, its `MixedShape` (where the rank's work splits into parts). Two things break
that, and the caller does not memoise under them: two-batch overlap, which splits the step's
requests by their individual contexts, and a head split over the unit, which reads the unit's
rows. Fixed-length prompts at a steady batch repeat their shapes, so most steps of a run are
found rather than priced.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import numpy as np

from sim.cost.batch import BatchShape, StepCost, all_equal
from sim.cost.memo import BoundedCache
from sim.cost.mixed_shape import DecodePath, Paths, mixed_shapes
from sim.cost.rank_shape import decode_signature

_ONE_RANK = np.ones(1, dtype=bool)  # the unit's one rank, running chunks


class OneRankSteps:
    """Whole step prices of a one-rank unit by the rank's shape (`paths`: the MLA path of
    each segment; `decode_path`: the one path of decode segments, or None where they differ;
    `chunk_shapes`: whether a rank with chunks is shaped as a `MixedShape`)."""

    def __init__(
        self, paths: Paths, decode_path: DecodePath, chunk_shapes: bool, max_entries: int
    ) -> None:
        self._paths, self._decode_path, self._chunk_shapes = paths, decode_path, chunk_shapes
        self._steps: BoundedCache[Hashable, StepCost] = BoundedCache(max_entries)

    def __contains__(self, key: object) -> bool:
        return key in self._steps

    def price(self, batch: BatchShape, price: Callable[[BatchShape], StepCost]) -> StepCost:
        """`price(batch)`, memoised by the step's shape where it has one."""
        key = self.key(batch)
        return price(batch) if key is None else self._steps.get(key, lambda: price(batch))

    def key(self, batch: BatchShape) -> Hashable | None:
        """The shape that sets a one-rank step's price, or None for a step it does not (an
        empty one, a decode step of mixed widths or paths, chunks without a `MixedShape`)."""
        dec, new = batch.is_decode, batch.new_tokens
        if batch.size == 0:
            return None
        if np.count_nonzero(dec) < dec.shape[0]:
            if not self._chunk_shapes:
                return None
            tokens = np.array([float(np.add.reduce(new))])  # whole tokens: the exact sum
            return mixed_shapes(batch, _ONE_RANK, [0], self._paths, tokens)[0]
        if not all_equal(new):
            return None
        path = self._decode_path(new, batch.kv_tokens, dec)
        if path is None:
            return None
        return decode_signature(batch, int(new[0]), path)
