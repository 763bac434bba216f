"""The requests a unit is running, as compact columns the per-step arithmetic reads directly.

Gathering a dozen columns of ~15k running requests out of the run-wide `RequestTable` every step
costs more than the step's own arithmetic, so a unit keeps here, in arbitrary but deterministic
order, what changes every step and what every step reads, already in the form the step uses:
`kv` (cached tokens once this step's drafts are written: the batch's `kv_tokens`), `end` (the
`kv` at which the request has emitted its whole output: a decode step only adds to `kv`, and
the output left is `end - kv`), `pages` and `room` (the largest `kv` those pages hold), `rank`.
Per-rank request counts and the number of rows still in prefill are kept as rows come and go.
The table stays the record: generated tokens and KV pages are written back (`sync`) before a
request leaves or is preempted and at the end of the run; prefill progress lives in the table.
"""

from __future__ import annotations

import numpy as np

from sim.engine.requests import IntArray, RequestTable

IDS, RANK, KV, END, PAGES, ROOM = range(6)  # rows of the column buffer


def leading(pos: IntArray | slice) -> IntArray | slice:
    """Ascending positions `pos` as the slice they make where they are the first len(pos) rows
    (`RunningSet.decode_rows` gives a slice already where it can), else `pos` itself."""
    if isinstance(pos, slice):
        return pos
    n = pos.shape[0]
    return slice(0, n) if n and int(pos[n - 1]) == n - 1 else pos


class RunningSet:
    """Columns of length `n`: views into one (columns x capacity) buffer that grows by doubling.

    `draft_tokens`, `page_tokens` and `state_tokens` fix how `kv` and `room` derive from a
    request's context and pages; `num_ranks` sizes `per_rank`.
    """

    def __init__(
        self,
        num_ranks: int = 1,
        *,
        draft_tokens: int = 0,
        page_tokens: int = 1,
        state_tokens: int = 0,
        capacity: int = 256,
    ) -> None:
        self.n = 0
        self.n_prefill = 0  # rows not yet decoding
        self.per_rank = np.zeros(num_ranks, dtype=np.int64)  # rows on each rank
        self.draft_tokens, self.page_tokens, self.state_tokens = (
            draft_tokens, page_tokens, state_tokens,
        )  # fmt: skip
        self._cap = capacity
        self._buf = np.zeros((6, capacity), dtype=np.int64)
        self._dec = np.zeros(capacity, dtype=bool)
        self._constants(capacity)
        self._rows()

    def _rows(self) -> None:
        # 1-D views of the buffer's rows: indexing a row costs a third of a 2-D index
        self._ids, self._rank, self._kv, self._end, self._pages, self._room = self._buf

    def _constants(self, cap: int) -> None:
        # read-only batch columns shared by every decode-only step: one value each, broadcast
        # (stride 0), so views never copy and a uniform column is seen as one without reading
        # it (`sim.cost.batch.all_equal`)
        self._width = np.broadcast_to(np.int64(self.width), (cap,))
        self._ones = np.broadcast_to(np.True_, (cap,))

    @property
    def width(self) -> int:
        """Every decode row's new tokens in a step: 1 + draft tokens."""
        return 1 + self.draft_tokens

    # column views (length n); writes go to the buffer
    @property
    def ids(self) -> IntArray:
        return self._ids[: self.n]

    @property
    def rank(self) -> IntArray:
        """Rank within the unit."""
        return self._rank[: self.n]

    @property
    def kv(self) -> IntArray:
        """Prompt + generated + draft tokens: the KV a decode step attends over (decode rows)."""
        return self._kv[: self.n]

    @property
    def end(self) -> IntArray:
        """Prompt + output + draft tokens: `kv` once the whole output is emitted."""
        return self._end[: self.n]

    @property
    def left(self) -> IntArray:
        """Output tokens still to emit (a copy)."""
        return np.maximum(self._end[: self.n] - self._kv[: self.n], 0)  # type: ignore[no-any-return]

    def left_at(self, pos: IntArray) -> IntArray:
        """`left` of the rows at `pos`."""
        return np.maximum(self._end[pos] - self._kv[pos], 0)  # type: ignore[no-any-return]

    @property
    def pages(self) -> IntArray:
        return self._pages[: self.n]

    @property
    def room(self) -> IntArray:
        """The largest `kv` the held pages cover (pages x page size - state tokens)."""
        return self._room[: self.n]

    @property
    def is_decode(self) -> np.ndarray:
        return self._dec[: self.n]

    def verify_width(self, m: int) -> IntArray:
        """New tokens of `m` decode segments (1 + draft tokens each), read-only."""
        return self._width[:m]

    def all_decode(self, m: int) -> np.ndarray:
        """`is_decode` of `m` decode segments, read-only."""
        return self._ones[:m]

    def columns(self, pos: IntArray) -> IntArray:
        """Every column of the few rows at `pos` at once (index the result with IDS, RANK, ...)."""
        return self._buf.take(pos, axis=1)

    def decode_rows(self) -> IntArray | slice:
        """Positions of the decode rows: the slice of the first rows where they lead (a
        colocated step's nearly always do: rows join at the end and start decoding after a
        chunk or two), else an index array. They lead exactly when the last `n_prefill` rows
        are all still in prefill, so only those few are read. A slice reads and writes the
        columns in place, where an index array gathers and scatters copies of them."""
        n, pre = self.n, self.n_prefill
        if not np.count_nonzero(self._dec[n - pre : n]):
            return slice(0, n - pre)
        return self._dec[:n].nonzero()[0]

    def set_pages(self, pos: IntArray | slice, pages: IntArray) -> None:
        self._pages[pos] = pages
        self._room[pos] = pages * self.page_tokens - self.state_tokens

    def _reserve(self, need: int) -> None:
        cap = self._cap
        while cap < need:
            cap *= 2
        b = np.zeros((6, cap), dtype=np.int64)
        b[:, : self.n] = self._buf[:, : self.n]
        d = np.zeros(cap, dtype=bool)
        d[: self.n] = self._dec[: self.n]
        self._buf, self._dec, self._cap = b, d, cap
        self._constants(cap)
        self._rows()

    def append(
        self, table: RequestTable, ids: IntArray, rank: IntArray, pages: IntArray, dec: np.ndarray
    ) -> None:
        """Add admitted requests: their rank in the unit, KV pages and whether they decode."""
        m = int(ids.shape[0])
        if m == 0:
            return
        if self.n + m > self._cap:
            self._reserve(self.n + m)
        sl = slice(self.n, self.n + m)
        inp = table.input_tokens[ids] + self.draft_tokens
        self._ids[sl] = ids
        self._rank[sl] = rank
        self._kv[sl] = inp + table.generated[ids]
        self._end[sl] = inp + table.output_tokens[ids]
        self.set_pages(sl, pages)
        self._dec[sl] = dec
        self.n += m
        self.n_prefill += m - int(np.count_nonzero(dec))
        np.add.at(self.per_rank, rank, 1)

    def sync(self, table: RequestTable, pos: IntArray | None = None) -> None:
        """Write generated tokens and KV pages of `pos` (default: all) back to the table."""
        p = slice(None) if pos is None else pos
        ids = self.ids[p]
        left = self.left if pos is None else self.left_at(pos)
        table.generated[ids] = table.output_tokens[ids] - left
        table.kv_pages[ids] = self.pages[p]

    def work_per_rank(self, table: RequestTable) -> IntArray:
        """Tokens still to compute per rank: output left, plus prefill left of rows in prefill."""
        R = self.per_rank.shape[0]
        work = np.bincount(self.rank, weights=self.left, minlength=R)
        if self.n_prefill:
            pre = (~self.is_decode).nonzero()[0]
            ids = self.ids[pre]
            rem = table.prefill_target[ids] - table.prefilled[ids]
            work += np.bincount(self.rank[pre], weights=rem, minlength=R)
        return work.astype(np.int64)  # exact: integer sums far below 2^53

    def turned_decode(self, table: RequestTable, pos: IntArray) -> None:
        """Requests at `pos` finished their prefill: refresh their columns from the table."""
        ids = self._ids[pos]
        self._kv[pos] = table.input_tokens[ids] + table.generated[ids] + self.draft_tokens
        self.n_prefill -= int(pos.shape[0] - np.count_nonzero(self._dec[pos]))
        self._dec[pos] = True

    def remove(self, pos: IntArray) -> None:
        """Drop the requests at `pos` (distinct, ascending): the last kept ones fill the holes."""
        self.pop(pos)

    def pop(self, pos: IntArray) -> IntArray:
        """`remove`, returning the removed rows' columns (index them with IDS, RANK, ...)."""
        cols = self.columns(pos)
        k = int(pos.shape[0])
        if k == 0:
            return cols
        keep_n = self.n - k
        gone = pos.tolist()
        holes = [p for p in gone if p < keep_n]
        tail = set(gone[len(holes) :])
        np.subtract.at(self.per_rank, cols[RANK], 1)
        if self.n_prefill:
            self.n_prefill -= k - int(np.count_nonzero(self._dec[pos]))
        if holes:
            dst = np.array(holes, dtype=np.int64)
            src = np.array([j for j in range(keep_n, self.n) if j not in tail], dtype=np.int64)
            self._buf[:, dst] = self._buf.take(src, axis=1)
            self._dec[dst] = self._dec[src]
        self.n = keep_n
        return cols
