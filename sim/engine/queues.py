"""Per-rank waiting queues: FIFO, preempted requests go back to the front.

Each entry carries what admission needs (KV pages, prefill tokens), fixed when it is queued, so
admitting reads integers rather than the request table. The first entry of every queue lives in
arrays (`head_ids`, `head_pages`, `head_tokens`), so a scheduler finds the ranks that can admit
anything in one vectorised test. The entries behind each head are a chain through one pool of
slots (numpy arrays: id, pages, tokens, next slot), with each rank's first and last slot:
a step's arrivals join their queues, and admitted heads hand over to the entry behind them, in
a few array operations whatever their number (a few arrivals, the usual step of a closed loop,
are linked one by one in scalar arithmetic); a walk of a few queues reads them in order
(`front`) and drops what it took (`drop_fronts`). Freed slots are reused, so the pool grows
only with the most entries queued at once.

A saturated colocated EP144 unit (~150 arrivals a step, up to ~89k requests queued) pushed
its arrivals at 2.8 us an entry when each went into a per-rank deque of tuples one by one
(0.2 us alone, the rest the garbage collections those allocations set off); through the slot
pool, 0.5 us.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from sim.engine.requests import IntArray

Entry = tuple[int, int, int]  # (request id, KV pages needed, prefill tokens to compute)
_NO_SLOT = -1
# `push_many` of at most this many entries queues them one by one: numpy's per-call cost
# would be most of the work (the app's closed loops release one to four requests a step)
FEW_ARRIVALS = 8
# `admissible` of a one-rank unit: its rank 0, or none (read-only)
_RANK_ZERO, _NO_RANKS = np.zeros(1, dtype=np.intp), np.zeros(0, dtype=np.intp)
_RANK_ZERO.flags.writeable = _NO_RANKS.flags.writeable = False


class RankQueues:
    """One FIFO per rank of a pool, with per-rank counters kept in numpy arrays."""

    EMPTY = np.iinfo(np.int64).max  # head_pages of an empty queue: never admissible
    # (head id, head pages, head tokens, length, queued pages) of an empty queue
    _EMPTIED = np.array([[-1], [EMPTY], [0], [0], [0]], dtype=np.int64)

    def __init__(self, num_ranks: int, slots: int = 1024) -> None:
        # one row per counter, so the heads of many ranks are read or emptied in one operation
        self._state = np.repeat(self._EMPTIED, num_ranks, axis=1)
        self.head_ids, self.head_pages, self.head_tokens, self.length, self.queued_pages = (
            self._state
        )
        # the entries behind the heads: rank r's chain runs _first[r] -> _next -> ... _last[r]
        self._first = np.full(num_ranks, _NO_SLOT, dtype=np.int64)
        self._last = np.full(num_ranks, _NO_SLOT, dtype=np.int64)
        self._slot = np.zeros((4, slots), dtype=np.int64)  # id, pages, tokens, next by slot
        self._slot_rows()
        self._free = np.arange(slots - 1, -1, -1, dtype=np.int64)  # a stack: its top is last
        self._n_free = slots

    # -- the slot pool -------------------------------------------------------------------------
    def _slot_rows(self) -> None:
        # 1-D views of the pool's rows: indexing a row by an index array costs a third of the
        # same index into the 2-D pool
        self._slot_id, self._slot_pages, self._slot_tokens, self._next = self._slot

    def _take_slots(self, n: int) -> IntArray:
        """`n` free slots (the pool grows by doubling when it has too few)."""
        if n > self._n_free:
            old = self._slot.shape[1]
            size = max(2 * old, old + n)
            grown = np.zeros((4, size), dtype=np.int64)
            grown[:, :old] = self._slot
            self._slot = grown
            self._slot_rows()
            free = np.empty(size, dtype=np.int64)  # free slots never outnumber the pool's
            free[: self._n_free] = self._free[: self._n_free]
            free[self._n_free : self._n_free + size - old] = np.arange(size - 1, old - 1, -1)
            self._free, self._n_free = free, self._n_free + size - old
        self._n_free -= n
        return self._free[self._n_free : self._n_free + n][::-1].copy()

    def _give_slots(self, slots: IntArray) -> None:
        n = slots.shape[0]
        self._free[self._n_free : self._n_free + n] = slots
        self._n_free += n

    def _chain(self, ids: IntArray, pages: IntArray, tokens: IntArray) -> IntArray:
        """Slots holding the entries, each linked to the next (the last to none)."""
        s = self._take_slots(ids.shape[0])
        self._slot_id[s], self._slot_pages[s], self._slot_tokens[s] = ids, pages, tokens
        self._next[s[:-1]] = s[1:]
        self._next[s[-1]] = _NO_SLOT
        return s

    # -- heads -----------------------------------------------------------------------------
    def _head(self, r: int) -> Entry:
        return int(self.head_ids[r]), int(self.head_pages[r]), int(self.head_tokens[r])

    def push_many(self, ranks: IntArray, ids: IntArray, pages: IntArray, tokens: IntArray) -> None:
        """Queue entry (ids[k], pages[k], tokens[k]) at the back of rank ranks[k], in order."""
        n = ranks.shape[0]
        if not n:
            return
        if n <= FEW_ARRIVALS:  # a closed loop's usual step: one by one, in scalar arithmetic
            columns = (ranks.tolist(), ids.tolist(), pages.tolist(), tokens.tolist())
            for at, i, p, t in zip(*columns, strict=True):
                self._push_one(at, i, p, t)
            return
        was_empty = self.length[ranks] == 0
        if np.count_nonzero(was_empty) == n and int(
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
        # each rank's entries together, in arrival order; a rank's first one heads an empty queue
        order = np.argsort(ranks, kind="stable")
        r = ranks[order]
        starts = np.ones(n, dtype=bool)
        starts[1:] = r[1:] != r[:-1]
        head = starts & was_empty[order]
        if np.count_nonzero(head):
            at, k = r[head], order[head]
            self.head_ids[at], self.head_pages[at], self.head_tokens[at] = (
                ids[k], pages[k], tokens[k],
            )  # fmt: skip
        behind = ~head
        if np.count_nonzero(behind):
            k, rb = order[behind], r[behind]
            s = self._chain(ids[k], pages[k], tokens[k])
            first = np.ones(rb.shape[0], dtype=bool)  # the first and last of each rank's run
            first[1:] = rb[1:] != rb[:-1]
            last = np.ones(rb.shape[0], dtype=bool)
            last[:-1] = first[1:]
            self._next[s[last]] = _NO_SLOT  # a run ends its rank's chain
            at = rb[first]
            tail = self._last[at]
            linked = tail != _NO_SLOT
            self._next[tail[linked]] = s[first][linked]
            self._first[at[~linked]] = s[first][~linked]
            self._last[rb[last]] = s[last]
        np.add.at(self.length, ranks, 1)
        np.add.at(self.queued_pages, ranks, pages)

    def _push_one(self, at: int, i: int, pages: int, tokens: int) -> None:
        """`push_many` of one entry: the head of an empty queue, or linked behind its last."""
        if not self.length[at]:
            self.head_ids[at], self.head_pages[at], self.head_tokens[at] = i, pages, tokens
            self.length[at], self.queued_pages[at] = 1, pages
            return
        if not self._n_free:
            s = int(self._take_slots(1)[0])
        else:
            self._n_free -= 1
            s = int(self._free[self._n_free])
        slot = self._slot
        slot[0, s], slot[1, s], slot[2, s], slot[3, s] = i, pages, tokens, _NO_SLOT
        tail = int(self._last[at])
        if tail == _NO_SLOT:
            self._first[at] = s
        else:
            slot[3, tail] = s
        self._last[at] = s
        self.length[at] += 1
        self.queued_pages[at] += pages

    def push_front(self, r: int, entries: list[Entry]) -> None:
        """Put `entries` (oldest first) ahead of everything queued on rank r."""
        if not entries:
            return
        behind = entries[1:]
        if self.length[r]:
            behind.append(self._head(r))
        if behind:
            ids, pages, tokens = (np.array(c, dtype=np.int64) for c in zip(*behind, strict=True))
            s = self._chain(ids, pages, tokens)
            self._next[s[-1]] = self._first[r]
            if self._first[r] == _NO_SLOT:
                self._last[r] = s[-1]
            self._first[r] = s[0]
        self.head_ids[r], self.head_pages[r], self.head_tokens[r] = entries[0]
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
        s = self._first[ranks]
        nxt = self._next[s]
        self._first[ranks] = nxt
        self._last[ranks[nxt == _NO_SLOT]] = _NO_SLOT
        self.length[ranks] -= 1
        self.queued_pages[ranks] -= self.head_pages[ranks]  # the admitted heads' pages
        self.head_ids[ranks], self.head_pages[ranks], self.head_tokens[ranks] = (
            self._slot_id[s], self._slot_pages[s], self._slot_tokens[s],
        )  # fmt: skip
        self._give_slots(s)

    def front(self, r: int) -> Iterator[Entry]:
        """Rank r's queue, oldest first, to read (change it only through this class)."""
        if not self.length[r]:
            return
        yield self._head(r)
        slot, s = self._slot, int(self._first[r])
        while s != _NO_SLOT:
            yield int(slot[0, s]), int(slot[1, s]), int(slot[2, s])
            s = int(slot[3, s])

    def drop_fronts(self, ranks: list[int], counts: list[int]) -> None:
        """Drop the first counts[k] entries of rank ranks[k] (ranks distinct): admitted."""
        if not ranks:
            return
        if len(ranks) == 1:  # one rank (a tensor-parallel unit's): scalar reads and writes
            self._drop_front(ranks[0], counts[0])
            return
        at = np.array(ranks, dtype=np.int64)  # numpy converts a list index far more slowly
        slot, empty = self._slot, self.EMPTY
        freed: list[int] = []
        pages: list[int] = []
        hi: list[int] = []
        hp: list[int] = []
        ht: list[int] = []
        first: list[int] = []
        heads, chains = self.head_pages[at].tolist(), self._first[at].tolist()
        for k, gone, s in zip(counts, heads, chains, strict=True):
            for _ in range(k - 1):  # the head, then the k - 1 entries behind it
                gone += int(slot[1, s])
                freed.append(s)
                s = int(slot[3, s])
            pages.append(gone)
            if s == _NO_SLOT:  # emptied
                hi.append(-1)
                hp.append(empty)
                ht.append(0)
                first.append(_NO_SLOT)
            else:  # the next entry becomes the head
                hi.append(int(slot[0, s]))
                hp.append(int(slot[1, s]))
                ht.append(int(slot[2, s]))
                first.append(int(slot[3, s]))
                freed.append(s)
        self.length[at] -= np.array(counts, dtype=np.int64)
        self.queued_pages[at] -= np.array(pages, dtype=np.int64)
        self.head_ids[at] = np.array(hi, dtype=np.int64)
        self.head_pages[at] = np.array(hp, dtype=np.int64)
        self.head_tokens[at] = np.array(ht, dtype=np.int64)
        chain = np.array(first, dtype=np.int64)
        self._first[at] = chain
        self._last[at[chain == _NO_SLOT]] = _NO_SLOT
        if freed:
            self._give_slots(np.array(freed, dtype=np.int64))

    def _drop_front(self, r: int, k: int) -> None:
        """`drop_fronts` of the first k entries of rank r alone."""
        slot = self._slot
        gone, s = int(self.head_pages[r]), int(self._first[r])
        freed: list[int] = []
        for _ in range(k - 1):  # the head, then the k - 1 entries behind it
            gone += int(slot[1, s])
            freed.append(s)
            s = int(slot[3, s])
        self.length[r] -= k
        self.queued_pages[r] -= gone
        if s == _NO_SLOT:  # emptied
            self.head_ids[r], self.head_pages[r], self.head_tokens[r] = -1, self.EMPTY, 0
            nxt = _NO_SLOT
        else:  # the next entry becomes the head
            self.head_ids[r], self.head_pages[r], self.head_tokens[r] = (
                int(slot[0, s]), int(slot[1, s]), int(slot[2, s])
            )  # fmt: skip
            nxt = int(slot[3, s])
            freed.append(s)
        self._first[r] = nxt
        if nxt == _NO_SLOT:
            self._last[r] = _NO_SLOT
        if freed:
            self._give_slots(np.array(freed, dtype=np.int64))

    def heads(self, ranks: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        """(ids, pages, prefill tokens) of the first entry of each of `ranks`."""
        return self.head_ids[ranks], self.head_pages[ranks], self.head_tokens[ranks]

    def ids(self, r: int) -> list[int]:
        return [e[0] for e in self.front(r)]

    def admissible(self, lo: int, hi: int, free_pages: IntArray, free_slots: IntArray) -> IntArray:
        """Ranks in [lo, hi) whose first request fits now (as indices relative to lo)."""
        if hi - lo == 1:  # one rank (a tensor-parallel unit's): scalar reads
            fits = self.head_pages[lo] <= free_pages[0] and free_slots[0] > 0
            return _RANK_ZERO if fits else _NO_RANKS
        head = self.head_pages[lo:hi]
        return ((head <= free_pages) & (free_slots > 0)).nonzero()[0]

    @property
    def total(self) -> int:
        return int(self.length.sum())
