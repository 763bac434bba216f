"""What the engine hands the cost model each step, and what it gets back.

The engine describes one forward step of a lock-step unit as flat numpy arrays, one entry per
request segment scheduled in the step; the cost model aggregates per rank itself, so a step costs
O(segments) vectorised work and every request's own context length counts (never a mean).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from sim.cost.rate import OpTime

FEW_DISTINCT = 32  # `distinct` of at most this many values: in Python

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


@dataclass(frozen=True, kw_only=True)
class BatchShape:
    """One step of one lock-step unit.

    Each index i is one request segment: `new_tokens[i]` query tokens computed this step on
    attention rank `rank[i]`, whose cache holds `kv_tokens[i]` tokens after the step (new ones
    included). Decode/verify segments have `is_decode[i]` True and new_tokens = 1 + draft tokens;
    prefill and extend (after a cached prefix) segments have it False. `samples_token[i]` says
    whether segment i computes logits this step: decode/verify segments always do, a prefill
    chunk only when it completes its prompt; None means every segment samples.
    `segments_per_rank[r]`, where the engine has already counted them: the segments on rank r
    (read-only; None: the cost model counts them from `rank`). `decode_width`, where the engine
    knows it: the new tokens of every decode segment, its one verify width (None: the cost
    model reads them from `new_tokens`).
    """

    num_ranks: int
    rank: IntArray
    new_tokens: IntArray
    kv_tokens: IntArray
    is_decode: NDArray[np.bool_]
    samples_token: NDArray[np.bool_] | None = None
    segments_per_rank: IntArray | None = None
    decode_width: int | None = None

    @property
    def size(self) -> int:
        return int(self.rank.shape[0])

    @property
    def prefix_tokens(self) -> IntArray:
        return self.kv_tokens - self.new_tokens

    @staticmethod
    def empty(num_ranks: int) -> BatchShape:
        z = np.zeros(0, dtype=np.int64)
        return BatchShape(
            num_ranks=num_ranks, rank=z, new_tokens=z, kv_tokens=z, is_decode=z.astype(bool)
        )


@dataclass(frozen=True, kw_only=True)
class StepCost:
    """Duration of one step and its breakdown.

    `duration_s` is what the simulated clock advances by. `rank_own_s[r]` is rank r's own
    time, all of its own work: attention, projections, router, shared
    experts, dense MLP and head where they are the rank's own, memory-bound kernels, TP
    all-reduce and MTP draft (0 for an idle rank; the lock-step group waits for the slowest).
    `ops` maps op name to its time on the critical path (ops sum to duration_s up to overlap,
    reported in `overlap_saved_s`), each op's launches inside its time; `launch_s` is what
    each of its `launches` paid (labelled `launch_label`), which the step log shows as a row of
    its own (`sim.engine.log`, `LAUNCH_ROW`).
    """

    duration_s: float
    rank_own_s: FloatArray
    ops: dict[str, OpTime] = field(default_factory=dict)
    overlap_saved_s: float = 0.0
    launch_s: float = 0.0
    launch_label: str = "published"

    @property
    def rank_imbalance(self) -> float:
        """max/mean of the ranks' own time, `rank_own_s` (1.0 = perfectly balanced)."""
        mean = float(self.rank_own_s.mean()) if self.rank_own_s.size else 0.0
        return float(self.rank_own_s.max()) / mean if mean > 0 else 1.0


def all_equal(a: NDArray[np.generic]) -> bool:
    """Whether every entry of non-empty 1-D `a` equals its first: at once for one value
    broadcast (stride 0: a decode step's verify widths, `sim.engine.running`), else one
    comparison and a count, far cheaper than `min() == max()` (two reductions) on a step's
    small arrays."""
    return a.strides[0] == 0 or not np.count_nonzero(a != a[0])


def distinct(a: NDArray[np.intp]) -> tuple[list[int], NDArray[np.intp]]:
    """`np.unique(a, return_inverse=True)`, the values as a list: in Python for a small `a`
    (a step's few busy ranks), where `np.unique`'s fixed cost is several times the work."""
    if a.shape[0] > FEW_DISTINCT:
        found, at = np.unique(a, return_inverse=True)
        return found.tolist(), at
    values: list[int] = a.tolist()
    kinds = sorted(set(values))
    place = {v: i for i, v in enumerate(kinds)}
    return kinds, np.array([place[v] for v in values], dtype=np.intp)


class StepCostModel(Protocol):
    """Anything that prices a step: the real cost model, or a fixed-cost one in tests."""

    def step_cost(self, batch: BatchShape) -> StepCost: ...


class ServingCost(StepCostModel, Protocol):
    """What the engine needs to know about one deployment besides step times."""

    @property
    def kv_capacity_tokens_per_rank(self) -> int:
        """Distinct KV tokens one attention rank can hold (every GPU of the rank holds them)."""
        ...

    @property
    def kv_bytes_per_token(self) -> float:
        """Bytes one cached token takes, all layers, one copy (what PD transfers)."""
        ...

    @property
    def state_tokens_per_request(self) -> int:
        """Fixed per-request state (linear-attention layers) in KV-token units; 0 if none."""
        ...
