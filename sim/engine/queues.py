"""Per-rank waiting queues: FIFO, preempted requests go back to the front.

Each entry carries what admission needs (KV pages, prefill tokens), fixed when it is queued, so
admitting reads Python ints rather than the request table. `head_pages` (the page need of each
queue's first request) lets a scheduler find the ranks that can admit anything in one vectorised
test.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from sim.engine.requests import IntArray

Entry = tuple[int, int, int]  # (request id, KV pages needed, prefill tokens to compute)


class RankQueues:
    """One FIFO per rank of a pool, with per-rank counters kept in numpy arrays."""

    EMPTY = np.iinfo(np.int64).max  # head_pages of an empty queue: never admissible

    def __init__(self, num_ranks: int) -> None:
        self._q: list[deque[Entry]] = [deque() for _ in range(num_ranks)]
        self.length = np.zeros(num_ranks, dtype=np.int64)
        self.head_pages = np.full(num_ranks, self.EMPTY, dtype=np.int64)
        self.queued_pages = np.zeros(num_ranks, dtype=np.int64)

    def _touch(self, r: int) -> None:
        q = self._q[r]
        self.length[r] = len(q)
        self.head_pages[r] = q[0][1] if q else self.EMPTY

    def push_back(self, r: int, entry: Entry) -> None:
        q = self._q[r]
        q.append(entry)
        self.queued_pages[r] += entry[1]
        self.length[r] = len(q)
        if len(q) == 1:  # the head changes only when the queue was empty
            self.head_pages[r] = entry[1]

    def push_many(self, ranks: IntArray, ids: IntArray, pages: IntArray, tokens: IntArray) -> None:
        """`push_back` of entries (ids[k], pages[k], tokens[k]) on ranks[k], in order."""
        qs, head = self._q, self.head_pages
        for r, i, p, t in zip(ranks.tolist(), ids.tolist(), pages.tolist(), tokens.tolist(),
                              strict=True):  # fmt: skip
            q = qs[r]
            if not q:  # the head changes only when the queue was empty
                head[r] = p
            q.append((i, p, t))
        n = self.length.shape[0]
        self.length += np.bincount(ranks, minlength=n)
        np.add.at(self.queued_pages, ranks, pages)

    def push_front(self, r: int, entries: list[Entry]) -> None:
        """Put `entries` (oldest first) ahead of everything queued on rank r."""
        self._q[r].extendleft(reversed(entries))
        self.queued_pages[r] += sum(e[1] for e in entries)
        self._touch(r)

    def peek(self, r: int) -> Entry:
        return self._q[r][0]

    def pop(self, r: int) -> Entry:
        e = self._q[r].popleft()
        self.queued_pages[r] -= e[1]
        self._touch(r)
        return e

    def entries(self, r: int) -> deque[Entry]:
        """Rank r's queue, first entry first (read-only: change it through push/pop)."""
        return self._q[r]

    def pop_front(self, r: int, k: int) -> None:
        """Drop the first `k` entries of rank r's queue (those a scheduler admitted)."""
        if k == 0:
            return
        q = self._q[r]
        pages = 0
        for _ in range(k):
            pages += q.popleft()[1]
        self.queued_pages[r] -= pages
        self._touch(r)

    def ids(self, r: int) -> list[int]:
        return [e[0] for e in self._q[r]]

    def admissible(self, lo: int, hi: int, free_pages: IntArray, free_slots: IntArray) -> IntArray:
        """Ranks in [lo, hi) whose first request fits now (as indices relative to lo)."""
        head = self.head_pages[lo:hi]
        return ((head <= free_pages) & (free_slots > 0)).nonzero()[0]

    @property
    def total(self) -> int:
        return int(self.length.sum())
