"""KV cache pages per attention rank: capacity, what is in use, the high-water mark."""

from __future__ import annotations

import numpy as np

from sim.engine.requests import EngineError, IntArray

_NONE = np.zeros(0, dtype=np.int64)
_NONE.flags.writeable = False
_RANK_ZERO = np.zeros(1, dtype=np.int64)  # a one-rank unit's rank 0, overflowing
_RANK_ZERO.flags.writeable = False


class KvPages:
    """Page accounting for every rank of one pool (all units and replicas).

    A request holds `ceil((tokens + state_tokens) / page_tokens)` pages, where `state_tokens` is
    a linear-attention model's fixed per-request state in KV-token units. `used` only changes
    through `take`/`grow`/`give`, which also keep the peak, checked against capacity at the end.
    """

    def __init__(
        self, num_ranks: int, capacity_tokens: int, page_tokens: int, state_tokens: int
    ) -> None:
        if page_tokens < 1:
            raise ValueError("page_tokens must be >= 1")
        self.page_tokens = page_tokens
        self.state_tokens = state_tokens
        self.capacity_pages = capacity_tokens // page_tokens
        self.used = np.zeros(num_ranks, dtype=np.int64)
        self.peak_pages = 0

    @property
    def max_tokens(self) -> int:
        """The most cached tokens one request can hold on a rank (its pages fill the rank)."""
        return self.capacity_pages * self.page_tokens - self.state_tokens

    def pages_for(self, tokens: IntArray | int) -> IntArray:
        """Pages that requests with `tokens` cached tokens hold (vectorised)."""
        # ceil((t + state) / page) as one floor division (exact for every integer t)
        t = np.asarray(tokens, dtype=np.int64)
        return (t + (self.state_tokens + self.page_tokens - 1)) // self.page_tokens  # type: ignore[no-any-return]

    def free(self, ranks: slice | IntArray) -> IntArray:
        return self.capacity_pages - self.used[ranks]  # type: ignore[no-any-return]

    def take(self, ranks: IntArray, pages: IntArray) -> None:
        """Add `pages[i]` to rank `ranks[i]` (pages may be negative for shrinking requests)."""
        if self.used.shape[0] == 1:  # one rank (a tensor-parallel pool's): a scalar sum
            top = self.used[0] = int(self.used[0]) + int(np.add.reduce(pages))
        else:
            np.add.at(self.used, ranks, pages)
            top = int(self.used.max()) if self.used.size else 0
        if top > self.peak_pages:
            self.peak_pages = top
        if top > self.capacity_pages:
            r = int(np.argmax(self.used))
            raise EngineError(
                f"rank {r} holds {top} KV pages, above its capacity {self.capacity_pages}"
            )

    def grow(self, lo: int, num: int, ranks: IntArray, pages: IntArray) -> IntArray:
        """Add `pages[i]` to rank lo + `ranks[i]` unless a rank of lo .. lo + num - 1 would
        overflow: then change nothing and return those ranks (relative to lo), else none."""
        if num == 1:  # one rank (a tensor-parallel unit's): scalar arithmetic
            top = int(self.used[lo]) + int(np.add.reduce(pages))
            if top > self.capacity_pages:
                return _RANK_ZERO
            self.used[lo] = top
            if top > self.peak_pages:
                self.peak_pages = top
            return _NONE
        seg = self.used[lo : lo + num]
        after = seg.copy()
        np.add.at(after, ranks, pages)
        top = int(after.max()) if after.size else 0
        if top > self.capacity_pages:
            return (after > self.capacity_pages).nonzero()[0]  # type: ignore[no-any-return]
        seg[:] = after
        if top > self.peak_pages:
            self.peak_pages = top
        return _NONE

    def give(self, ranks: IntArray, pages: IntArray) -> None:
        if self.used.shape[0] == 1:  # one rank (a tensor-parallel pool's): a scalar sum
            self.used[0] = int(self.used[0]) - int(np.add.reduce(pages))
        else:
            np.subtract.at(self.used, ranks, pages)
        if self.used.size and int(self.used.min()) < 0:
            raise EngineError(f"rank {int(np.argmin(self.used))} freed more KV pages than it held")
