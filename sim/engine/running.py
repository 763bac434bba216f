"""The requests a unit is running, as compact columns the per-step arithmetic reads directly.

Gathering a dozen columns of ~15k running requests out of the run-wide `RequestTable` every step
costs more than the step's own arithmetic, so a unit keeps what changes every step (`gen`,
`ctx`, `pages`) and what every step reads (`rank`, `out`) here, in arbitrary but deterministic
order. The table stays the record: `gen` and `pages` are written back (`sync`) before a request
leaves or is preempted and at the end of the run; prefill progress lives in the table only.
"""

from __future__ import annotations

import numpy as np

from sim.engine.requests import IntArray, RequestTable

_COLS = ("ids", "rank", "ctx", "gen", "out", "pages")


class RunningSet:
    """Columns of length `n` (views into buffers that grow by doubling)."""

    def __init__(self, capacity: int = 256) -> None:
        self.n = 0
        self._cap = capacity
        self._buf = {c: np.zeros(capacity, dtype=np.int64) for c in _COLS}
        self._dec = np.zeros(capacity, dtype=bool)

    # column views (length n); writes go to the buffers
    @property
    def ids(self) -> IntArray:
        return self._buf["ids"][: self.n]

    @property
    def rank(self) -> IntArray:
        """Rank within the unit."""
        return self._buf["rank"][: self.n]

    @property
    def ctx(self) -> IntArray:
        """Prompt + generated tokens (decode requests)."""
        return self._buf["ctx"][: self.n]

    @property
    def gen(self) -> IntArray:
        return self._buf["gen"][: self.n]

    @property
    def out(self) -> IntArray:
        return self._buf["out"][: self.n]

    @property
    def pages(self) -> IntArray:
        return self._buf["pages"][: self.n]

    @property
    def is_decode(self) -> np.ndarray:
        return self._dec[: self.n]

    def append(self, table: RequestTable, ids: IntArray, lo: int) -> None:
        """Add admitted requests, reading their current state from the table."""
        m = int(ids.shape[0])
        if m == 0:
            return
        if self.n + m > self._cap:
            cap = self._cap
            while cap < self.n + m:
                cap *= 2
            for c, a in self._buf.items():
                b = np.zeros(cap, dtype=np.int64)
                b[: self.n] = a[: self.n]
                self._buf[c] = b
            d = np.zeros(cap, dtype=bool)
            d[: self.n] = self._dec[: self.n]
            self._dec, self._cap = d, cap
        sl = slice(self.n, self.n + m)
        gen = table.generated[ids]
        self._buf["ids"][sl] = ids
        self._buf["rank"][sl] = table.rank[ids] - lo
        self._buf["ctx"][sl] = table.input_tokens[ids] + gen
        self._buf["gen"][sl] = gen
        self._buf["out"][sl] = table.output_tokens[ids]
        self._buf["pages"][sl] = table.kv_pages[ids]
        self._dec[sl] = table.prefilled[ids] >= table.prefill_target[ids]
        self.n += m

    def sync(self, table: RequestTable, pos: IntArray | np.ndarray | None = None) -> None:
        """Write generated tokens and KV pages of `pos` (default: all) back to the table."""
        p = slice(None) if pos is None else pos
        ids = self.ids[p]
        table.generated[ids] = self.gen[p]
        table.kv_pages[ids] = self.pages[p]

    def turned_decode(self, table: RequestTable, pos: IntArray) -> None:
        """Requests at `pos` finished their prefill: refresh their columns from the table."""
        ids = self._buf["ids"][pos]
        gen = table.generated[ids]
        self._buf["gen"][pos] = gen
        self._buf["ctx"][pos] = table.input_tokens[ids] + gen
        self._dec[pos] = True

    def remove(self, mask: np.ndarray) -> None:
        """Drop the requests where `mask` is True: the last kept ones move into the holes."""
        holes = mask.nonzero()[0]
        k = int(holes.shape[0])
        if k == 0:
            return
        keep_n = self.n - k
        dst = holes[holes < keep_n]
        src = (~mask[keep_n:]).nonzero()[0] + keep_n
        for a in self._buf.values():
            a[dst] = a[src]
        self._dec[dst] = self._dec[src]
        self.n = keep_n
