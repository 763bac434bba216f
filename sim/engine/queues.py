"""Per-rank waiting queues: FIFO, preempted requests go back to the front.

Each entry carries what admission needs (KV pages, prefill tokens), fixed when it is queued, so
admitting reads Python ints rather than the request table. The first entry of every queue lives
in arrays (`head_ids`, `head_pages`, `head_tokens`), the entries behind it in a Python deque per
rank: a scheduler finds the ranks that can admit anything in one vectorised test, and in the
usual step (each arrival on its own empty queue, or a saturated rank's head taking the slot a
completion freed) requests join and leave the queues through array operations alone
(`pop_heads` moves the entry behind each admitted head into the arrays). A walk of a few queues
reads them in order (`front`) and drops what it took (`drop_fronts`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

import numpy as np

from sim.engine.requests import IntArray

Entry = tuple[int, int, int]  # (request id, KV pages needed, prefill tokens to compute)


class RankQueues:
    """One FIFO per rank of a pool, with per-rank counters kept in numpy arrays."""

    EMPTY = np.iinfo(np.int64).max  # head_pages of an empty queue: never admissible
    # (head id, head pages, head tokens, length, queued pages) of an empty queue
    _EMPTIED = np.array([[-1], [EMPTY], [0], [0], [0]], dtype=np.int64)

    def __init__(self, num_ranks: int) -> None:
        self._rest: list[deque[Entry]] = [deque() for _ in range(num_ranks)]  # behind the head
        # one row per counter, so the heads of many ranks are read or emptied in one operation
        self._state = np.repeat(self._EMPTIED, num_ranks, axis=1)
        self.head_ids, self.head_pages, self.head_tokens, self.length, self.queued_pages = (
            self._state
        )

    def _head(self, r: int) -> Entry:
        return int(self.head_ids[r]), int(self.head_pages[r]), int(self.head_tokens[r])

    def _set_head(self, r: int, e: Entry | None) -> None:
        """Rank r's head becomes `e` (None: the queue is empty); length and pages are the
        caller's."""
        self.head_ids[r], self.head_pages[r], self.head_tokens[r] = (
            (-1, self.EMPTY, 0) if e is None else e
        )

    def push_many(self, ranks: IntArray, ids: IntArray, pages: IntArray, tokens: IntArray) -> None:
        """Queue entry (ids[k], pages[k], tokens[k]) at the back of rank ranks[k], in order."""
        if not ranks.shape[0]:
            return
        if not np.count_nonzero(self.length[ranks]) and int(
            np.bincount(ranks, minlength=self.length.shape[0]).max()
        ) == 1:  # fmt: skip
            # distinct ranks, every queue empty: each entry is its rank's head
            # row views, not the 2-D state: a 1-D index costs a third of a 2-D one
            self.head_ids[ranks], self.head_pages[ranks], self.head_tokens[ranks] = (
                ids, pages, tokens,
            )  # fmt: skip
            self.length[ranks] = 1
            self.queued_pages[ranks] = pages
            return
        lens, rest = self.length.tolist(), self._rest
        started: list[int] = []
        heads: list[Entry] = []
        entries = zip(ids.tolist(), pages.tolist(), tokens.tolist(), strict=True)
        for r, e in zip(ranks.tolist(), entries, strict=True):
            if lens[r] == 0:
                lens[r] = 1
                started.append(r)
                heads.append(e)
            else:
                rest[r].append(e)
        if started:
            self._state[:3, np.array(started, dtype=np.int64)] = np.array(heads).T
        np.add.at(self.length, ranks, 1)
        np.add.at(self.queued_pages, ranks, pages)

    def push_front(self, r: int, entries: list[Entry]) -> None:
        """Put `entries` (oldest first) ahead of everything queued on rank r."""
        if not entries:
            return
        behind = entries[1:]
        if self.length[r]:
            behind.append(self._head(r))
        self._rest[r].extendleft(reversed(behind))
        self._set_head(r, entries[0])
        self.length[r] += len(entries)
        self.queued_pages[r] += sum(e[1] for e in entries)

    def pop_heads(self, ranks: IntArray) -> None:
        """Drop the first entry of each of `ranks` (distinct, none empty): admitted heads. The
        entry behind each moves into the head arrays, all of them in one assignment."""
        # row views, not the 2-D state: a 1-D index costs a third of a 2-D one
        longer = self.length[ranks] > 1
        n_longer = int(np.count_nonzero(longer))  # cheaper than any() / all() on small arrays
        if n_longer == 0:
            self._state[:, ranks] = self._EMPTIED
            return
        if n_longer < longer.shape[0]:
            self._state[:, ranks[~longer]] = self._EMPTIED
            ranks = ranks[longer]
        rest = self._rest
        ids, pages, tokens = zip(*[rest[r].popleft() for r in ranks.tolist()], strict=True)
        self.length[ranks] -= 1
        self.queued_pages[ranks] -= self.head_pages[ranks]  # the admitted heads' pages
        self.head_ids[ranks], self.head_pages[ranks], self.head_tokens[ranks] = ids, pages, tokens

    def front(self, r: int) -> Iterator[Entry]:
        """Rank r's queue, oldest first, to read (change it only through this class)."""
        if self.length[r]:
            yield self._head(r)
            yield from self._rest[r]

    def drop_fronts(self, ranks: list[int], counts: list[int]) -> None:
        """Drop the first counts[k] entries of rank ranks[k] (ranks distinct): admitted."""
        if not ranks:
            return
        rest, empty = self._rest, self.EMPTY
        heads = self.head_pages[np.array(ranks, dtype=np.int64)].tolist()
        pages: list[int] = []
        hi: list[int] = []
        hp: list[int] = []
        ht: list[int] = []
        for r, k, head in zip(ranks, counts, heads, strict=True):
            q = rest[r]
            gone = head
            for _ in range(k - 1):
                gone += q.popleft()[1]
            pages.append(gone)
            i, p, t = q.popleft() if q else (-1, empty, 0)
            hi.append(i)
            hp.append(p)
            ht.append(t)
        # index arrays, not lists: numpy converts a list index far more slowly
        at = np.array(ranks, dtype=np.int64)
        self.length[at] -= np.array(counts, dtype=np.int64)
        self.queued_pages[at] -= np.array(pages, dtype=np.int64)
        self.head_ids[at] = np.array(hi, dtype=np.int64)
        self.head_pages[at] = np.array(hp, dtype=np.int64)
        self.head_tokens[at] = np.array(ht, dtype=np.int64)

    def heads(self, ranks: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        """(ids, pages, prefill tokens) of the first entry of each of `ranks`."""
        return self.head_ids[ranks], self.head_pages[ranks], self.head_tokens[ranks]

    def ids(self, r: int) -> list[int]:
        return [e[0] for e in self.front(r)]

    def admissible(self, lo: int, hi: int, free_pages: IntArray, free_slots: IntArray) -> IntArray:
        """Ranks in [lo, hi) whose first request fits now (as indices relative to lo)."""
        head = self.head_pages[lo:hi]
        return ((head <= free_pages) & (free_slots > 0)).nonzero()[0]

    @property
    def total(self) -> int:
        return int(self.length.sum())
