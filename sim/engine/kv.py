"""KV cache pages per attention rank: capacity, what is in use, the high-water mark."""

from __future__ import annotations

import numpy as np

from sim.engine.requests import EngineError, IntArray


class KvPages:
    """Page accounting for every rank of one pool (all units and replicas).

    A request holds `ceil((tokens + state_tokens) / page_tokens)` pages, where `state_tokens` is
    a linear-attention model's fixed per-request state in KV-token units. `used` only changes
    through `take`/`give`, which also keep the peak, checked against capacity at the end.
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

    def pages_for(self, tokens: IntArray | int) -> IntArray:
        """Pages that requests with `tokens` cached tokens hold (vectorised)."""
        t = np.asarray(tokens, dtype=np.int64) + self.state_tokens
        return -(-t // self.page_tokens)  # type: ignore[no-any-return]

    def free(self, ranks: slice | IntArray) -> IntArray:
        return self.capacity_pages - self.used[ranks]  # type: ignore[no-any-return]

    def take(self, ranks: IntArray, pages: IntArray) -> None:
        """Add `pages[i]` to rank `ranks[i]` (pages may be negative for shrinking requests)."""
        np.add.at(self.used, ranks, pages)
        top = int(self.used.max()) if self.used.size else 0
        if top > self.peak_pages:
            self.peak_pages = top
        if top > self.capacity_pages:
            r = int(np.argmax(self.used))
            raise EngineError(
                f"rank {r} holds {top} KV pages, above its capacity {self.capacity_pages}"
            )

    def take_dense(self, lo: int, per_rank: IntArray) -> None:
        """Add a per-rank vector to ranks lo .. lo + len - 1 (one unit's ranks)."""
        seg = self.used[lo : lo + per_rank.shape[0]]
        seg += per_rank
        top = int(seg.max()) if seg.size else 0
        if top > self.peak_pages:
            self.peak_pages = top
        if top > self.capacity_pages:
            raise EngineError(
                f"rank {lo + int(np.argmax(seg))} holds {top} KV pages, above its capacity "
                f"{self.capacity_pages}"
            )

    def give(self, ranks: IntArray, pages: IntArray) -> None:
        np.subtract.at(self.used, ranks, pages)
        if self.used.size and int(self.used.min()) < 0:
            raise EngineError(f"rank {int(np.argmin(self.used))} freed more KV pages than it held")
