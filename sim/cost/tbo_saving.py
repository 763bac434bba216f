"""What two-batch overlap saves in one step (negative where splitting costs more than it hides).

Only the MoE layers are split (`moe_layer_share`): the critical rank's dense layers, head and
MTP passes run once, whole. In the MoE layers each rank splits its work in two
(`sim.cost.micro_batches.split_in_two`), except a rank that cannot (one decode request, or a
one-token chunk): SGLang splits it into an empty micro-batch and a whole one, so all its work
and tokens go to the second. A micro-batch's rank work is the largest part of a splitting rank,
or a whole rank's work if that is longer. The routed experts and the communication are
re-priced for each micro-batch's tokens (the expert weights are read twice; each exchange is
again set by its busiest sender or receiver) and the stages scheduled by
`sim.cost.overlap.overlapped_s`. No rank splitting: nothing hidden or added.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

import numpy as np
from numpy.typing import NDArray

from sim.cost.batch import BatchShape
from sim.cost.comm_load import CommLoad, micro_batch_loads
from sim.cost.layer_ops import RankSegments
from sim.cost.memo import BoundedCache
from sim.cost.micro_batches import split_in_two
from sim.cost.mixed_rank import MixedRanks
from sim.cost.mixed_shape import MixedShape, Shape
from sim.cost.overlap import MicroBatch, comm_time, moe_layers_s, overlapped_s
from sim.cost.rank_shape import RankShape, shape_segments
from sim.cost.rank_work import Ops
from sim.specs.deployment import Deployment
from sim.specs.model import ModelSpec

# candidates whose halves are primed at once: the loop prices halves in order of their whole
# MoE-layer time until no rank can raise either maximum (the colocated bench: ~31 of ~142 chunk
# ranks a step), so a block this size wastes at most a few pricings at its end
PRIME_BLOCK = 8


class RankMoe(Protocol):
    """A rank's priced work, as far as the split needs it: its time in the MoE layers."""

    @property
    def moe_s(self) -> float: ...


class SplitStep(NamedTuple):
    """A step that two micro-batches split: its `batch`, requests (`n_r`), tokens and own
    seconds per rank, its rounded `load`, its critical rank `crit`, rank r's work
    `works[at[r]]` at shape `shapes[at[r]]`, and its unit-wide ops."""

    batch: BatchShape
    n_r: np.ndarray
    load: CommLoad
    rank_s: np.ndarray
    tokens_r: np.ndarray
    crit: int
    shapes: Sequence[Shape]
    works: Sequence[RankMoe]
    at: NDArray[np.intp]
    unit_ops: Ops


class TboSaving:
    """Two-batch overlap's saving for one deployment's steps, with its memos: each rank
    shape's two halves (by shape) and each schedule of a step's stages (by the stages)."""

    def __init__(
        self,
        model: ModelSpec,
        deployment: Deployment,
        mixed: MixedRanks | None,
        rank_ops: Callable[[RankSegments], Ops],
        micro_ops: Callable[[CommLoad], Ops],
        max_entries: int,
    ) -> None:
        """`rank_ops`: a rank's own ops at its segments; `micro_ops`: one micro-batch's routed
        experts and EP exchange at a rounded load; `mixed`: the pricer of ranks with chunks
        (None where their work does not split into parts)."""
        self.model, self.deployment = model, deployment
        self._mixed, self._rank_ops, self._micro_ops = mixed, rank_ops, micro_ops
        self._halves: BoundedCache[RankShape, tuple[float, float]] = BoundedCache(max_entries)
        self._schedules: BoundedCache[tuple[object, ...], float] = BoundedCache(max_entries)
        # decode-only steps' savings, by what sets them (`saved_s`)
        self._decode_saved: BoundedCache[tuple[object, ...], float] = BoundedCache(max_entries)

    def saved_s(self, step: SplitStep) -> float:
        """The time the step's two micro-batches save against running it whole."""
        if step.load.decode_only and not np.count_nonzero(step.n_r == 1):
            # every busy rank splits and the slowest one is the critical rank: the saving
            # follows from that rank's shape and own time, the step's load and its unit-wide
            # ops alone (the bench's decode hour meets 307 such keys in its 32,345 steps)
            crit, unit_ops = step.crit, step.unit_ops
            serial = unit_ops["moe_routed"].seconds + unit_ops["moe_elementwise"].seconds
            shape = step.shapes[int(step.at[crit])]
            key = (shape, float(step.rank_s[crit]), step.load, serial, comm_time(unit_ops))
            return self._decode_saved.get(key, lambda: self._saved_s(step))
        return self._saved_s(step)

    def _saved_s(self, step: SplitStep) -> float:
        """`saved_s`, priced."""
        batch, n_r, load, rank_s, tokens_r, crit, shapes, works, index, unit_ops = step
        whole = np.zeros(batch.num_ranks, dtype=bool)
        if (n_r == 1).any():
            unsplit = (n_r[batch.rank] == 1) & (batch.is_decode | (batch.new_tokens < 2))
            whole[batch.rank[unsplit]] = True
        split = (n_r > 0) & ~whole
        if not split.any():
            return 0.0
        # a micro-batch lasts as long as its slowest rank's part. Decode ranks' parts follow
        # their whole work (the slowest one's are the largest); a prefill rank's need not
        # (each part of a chunk reads its whole prefix), so each is priced
        if load.decode_only:  # the slowest splitting rank's parts are the largest
            candidates = [int(np.argmax(np.where(split, rank_s, -1.0)))]
        else:
            has_prefill = np.zeros(batch.num_ranks, dtype=bool)
            has_prefill[batch.rank[~batch.is_decode]] = True
            candidates = (split & has_prefill).nonzero()[0].tolist()
            if (split & ~has_prefill).any():
                candidates.append(int(np.argmax(np.where(split & ~has_prefill, rank_s, -1.0))))
        # a part is less work than its whole rank, so costs no more (pricing is monotone in
        # work): ranks whose whole MoE-layer work cannot raise either half's maximum are skipped
        m = self.model
        bound = {int(index[r]): works[int(index[r])].moe_s for r in candidates}
        attn = [0.0, 0.0]
        order = sorted(bound, key=lambda i: (-bound[i], i))
        for j, i in enumerate(order):
            if bound[i] <= min(attn):
                break
            if j % PRIME_BLOCK == 0:
                self._prime([shapes[x] for x in order[j : j + PRIME_BLOCK] if bound[x] > min(attn)])
            first, second = self.parts_s(shapes[i])
            attn = [max(attn[0], first), max(attn[1], second)]
        if whole.any():  # the slowest whole rank's MoE layers, all in the second
            r = int(np.argmax(np.where(whole, rank_s, -1.0)))
            attn[1] = max(attn[1], works[int(index[r])].moe_s)
        micro = []
        loads = micro_batch_loads(load, batch, tokens_r, crit, whole)
        if loads[0] is loads[1]:  # even halves: one load, rounded and priced once
            half = loads[0].rounded()
            priced = [(half, self._micro_ops(half))] * 2
        else:
            priced = [(x, self._micro_ops(x)) for x in (y.rounded() for y in loads)]
        for a, (part, ops) in zip(attn, priced, strict=True):
            micro.append(
                MicroBatch(
                    rank_s=a,
                    routed_s=ops["moe_routed"].seconds,
                    dispatch_s=ops["ep_dispatch"].seconds,
                    combine_s=ops["ep_combine"].seconds,
                    sender_tokens_per_gpu=part.sender_tokens / self.deployment.attn_tp,
                )
            )
        once = float(rank_s[crit]) - works[int(index[crit])].moe_s  # dense, head, MTP
        key = (micro[0], micro[1], once, load.decode_only)
        with_overlap = self._schedules.get(
            key,
            lambda: overlapped_s(
                micro[0], micro[1], once_s=once, layers=m.moe_layers, decode_only=load.decode_only
            ),
        )
        serial = unit_ops["moe_routed"].seconds + unit_ops["moe_elementwise"].seconds
        return float(rank_s[crit]) + serial + comm_time(unit_ops) - with_overlap

    def _prime(self, shapes: list[Shape]) -> None:
        """Price the chunk attention of the next candidates' halves together where that is
        exact (`MixedRanks.prime_halves`): the loop then finds the same parts in the memo."""
        mixed = [x for x in shapes if isinstance(x, MixedShape)]
        if self._mixed is not None and len(mixed) > 1:
            self._mixed.prime_halves(mixed)

    def parts_s(self, shape: Shape) -> tuple[float, float]:
        """A rank's own work in the MoE layers of each of its two micro-batches, each priced
        on its own, per step, memoised by the rank's shape. At decode batch sizes a
        micro-batch's projection GEMMs read the same weights for half the tokens, so it costs
        more than half; at prefill sizes (compute-bound) about half, plus its launches."""
        if isinstance(shape, MixedShape):
            assert self._mixed is not None
            return self._mixed.halves_moe_s(shape)

        def price() -> tuple[float, float]:
            first, second = split_in_two(shape_segments(shape))
            m = self.model
            return moe_layers_s(m, self._rank_ops(first)), moe_layers_s(m, self._rank_ops(second))

        return self._halves.get(shape, price)
