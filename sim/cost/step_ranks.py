"""A step's ranks as the cost model prices them: each busy rank's shape and its index into the
step's distinct shapes (`StepRanks.shapes`), or, for a step of several chunk ranks that runs
whole, each rank's own seconds and the slowest rank's work alone (`whole_with_chunks`).

Decode-only ranks whose requests share one width and MLA path are found in the decode table
(`rank_shape.DecodeTable`) by one signature each; ranks with prompt chunks are shaped as
`MixedShape`s for their memoised parts (`sim.cost.mixed_rank`) where their work splits so;
any other rank is shaped one at a time (`rank_shape.rank_shape`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from numpy.typing import NDArray

from sim.cost.batch import BatchShape, all_equal, distinct
from sim.cost.decode_sums import DecodeSums
from sim.cost.mixed_rank import MixedRanks
from sim.cost.mixed_shape import Shape, mixed_shapes
from sim.cost.mixed_work import MixedWork
from sim.cost.rank_shape import DecodeTable, rank_shape

if TYPE_CHECKING:  # it prices ranks for the serving model, whose work it returns
    from sim.cost.serving import RankWork


class StepCounts(NamedTuple):
    """What pricing a step counts once: its `batch`, segments per rank (`n_r`), the ranks
    running a chunk (`mixed`), the busy decode-only ranks, tokens per rank and its decode side
    where counted (`sim.cost.decode_sums`)."""

    batch: BatchShape
    n_r: NDArray[np.int64]
    mixed: NDArray[np.bool_]
    busy_decode: NDArray[np.bool_]
    tokens_r: np.ndarray  # float
    sums: DecodeSums | None = None


class StepRanks:
    """Shapes (and, for a step run whole, prices) a step's ranks for one deployment: `table`
    its decode table, `mixed` its pricer of chunk ranks by parts (None where their work does
    not split), `paths` the MLA path of each segment."""

    def __init__(
        self,
        table: DecodeTable[RankWork],
        mixed: MixedRanks | None,
        paths: Callable[..., NDArray[np.int8]],  # `MlaPaths.paths`: one batch's, or grouped
    ) -> None:
        self.table, self.mixed, self.paths = table, mixed, paths

    def whole_with_chunks(self, c: StepCounts) -> tuple[NDArray[np.float64], RankWork | MixedWork]:
        """Each rank's own seconds, and the slowest rank's work, of a step with chunk ranks that
        runs whole (its decode side counted): the chunk ranks' seconds from their parts
        (`MixedRanks.seconds`), the decode ranks' from the decode table, as `shapes` and the
        memos give them; only the slowest rank's work is assembled."""
        assert self.mixed is not None and c.sums is not None
        batch, sums, table = c.batch, c.sums, self.table
        chunk_ranks = c.mixed.nonzero()[0]
        shapes = mixed_shapes(batch, c.mixed, chunk_ranks.tolist(), self.paths, c.tokens_r, sums)
        rank_s = np.zeros(batch.num_ranks)
        rank_s[chunk_ranks] = self.mixed.seconds(shapes)
        rs = c.busy_decode.nonzero()[0]
        slots, seconds = table.lookup(c.n_r[rs], sums.kv_sum[rs], sums.width, sums.path, batch.size)
        rank_s[rs] = seconds
        crit = int(rank_s.argmax())
        if c.mixed[crit]:
            return rank_s, self.mixed.work(shapes[int(np.searchsorted(chunk_ranks, crit))])
        return rank_s, table.works[int(slots[int(np.searchsorted(rs, crit))])]

    def shapes(self, c: StepCounts) -> tuple[list[Shape], NDArray[np.intp]]:
        """The distinct shapes of the step's busy ranks and each rank's index into them (idle
        ranks: one past the end), the chunk ranks' first. Decode-only ranks whose requests
        share one width and path are shaped together, vectorised; so are ranks with prompt
        chunks where their work splits into parts."""
        batch, n_r, mixed, busy_decode, tokens_r, sums = c
        ranks, rank = batch.num_ranks, batch.rank
        shapes: list[Shape] = []
        index = np.zeros(ranks, dtype=np.intp)
        alone = mixed.nonzero()[0].tolist()
        everyone = not alone  # a decode-only step: no segment to select
        if alone and self.mixed is not None:
            shapes = list(mixed_shapes(batch, mixed, alone, self.paths, tokens_r, sums))
            index[alone] = np.arange(len(alone))
            alone = []
        # decode-only ranks of one width and path: (their context sums, the width, the path)
        uniform: tuple[NDArray[np.float64], int, int] | None = None
        rs = busy_decode.nonzero()[0] if np.count_nonzero(busy_decode) else None
        if rs is not None and sums is not None and not alone:  # from the counted decode side
            uniform = (sums.kv_sum[rs], sums.width, sums.path)
        elif rs is not None:
            sel = slice(None) if everyone else busy_decode[rank]
            q, k = batch.new_tokens[sel], batch.kv_tokens[sel]
            paths = self.paths(q, k, batch.is_decode[sel])
            if all_equal(q) and all_equal(paths):
                # whole-token contexts: their float64 sums are exact, whatever the order
                kv_sum = np.bincount(rank[sel], weights=k, minlength=ranks)[rs]
                uniform = (kv_sum.astype(np.float64, copy=False), int(q[0]), int(paths[0]))
            else:
                alone += rs.tolist()
        if rs is not None and uniform is not None:  # shaped together, vectorised
            slots, _ = self.table.lookup(n_r[rs], *uniform, batch.size)
            kinds, at = distinct(slots)
            index[rs] = at + len(shapes)
            shapes += [self.table.shapes[i] for i in kinds]
        for r in alone:  # ranks with prefill chunks (and mixed decode widths): one at a time
            sel = rank == r
            q, k, dec = batch.new_tokens[sel], batch.kv_tokens[sel], batch.is_decode[sel]
            samples = None if batch.samples_token is None else batch.samples_token[sel]
            index[r] = len(shapes)
            shapes.append(rank_shape(q, k, dec, self.paths(q, k, dec), samples))
        index[n_r == 0] = len(shapes)
        return shapes, index
