"""Append-only record of every step a pool ran: when, how long, what it held, where time went.

One `StepLog` per pool (its ranks per unit fix the width of the per-rank batch matrix). Columns
grow by doubling; `view()` returns trimmed read-only arrays for `sim.metrics` and the trace.
Per-request timestamps (arrival, first token, finish) live in the `RequestTable`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sim.cost.batch import StepCost

_SCALARS: dict[str, type] = {
    "unit": np.int32,
    "start_s": np.float64,
    "duration_s": np.float64,
    "segments": np.int64,  # request segments in the step (all ranks)
    "decode_reqs": np.int64,  # decode/verify segments
    "prefill_tokens": np.int64,  # prefill/extend tokens computed
    "output_tokens": np.int64,  # tokens emitted to users
    "accept_tokens": np.int64,  # sum over decode segments of accepted drafts + 1 (untruncated)
    "imbalance": np.float64,  # max/mean attention time over the unit's ranks
    "kv_pages": np.int64,  # KV pages in use on the unit's ranks after the step
    "overlap_saved_s": np.float64,
}


@dataclass(frozen=True)
class StepRecord:
    """What a unit reports after one step (cost as priced, counts as executed)."""

    unit: int
    start_s: float
    cost: StepCost
    batch_per_rank: NDArray[np.int64]
    decode_reqs: int
    prefill_tokens: int
    output_tokens: int
    accept_tokens: int
    kv_pages: int


class StepLog:
    """Per-step columns of one pool, plus per-op seconds and each op's time by source."""

    def __init__(self, ranks_per_unit: int, capacity: int = 1024) -> None:
        self.ranks_per_unit = ranks_per_unit
        self.n = 0
        self._cap = capacity
        self._cols: dict[str, NDArray[Any]] = {
            k: np.zeros(capacity, dtype=t) for k, t in _SCALARS.items()
        }
        self._batch = np.zeros((capacity, ranks_per_unit), dtype=np.int32)
        self.op_names: list[str] = []
        self._op_index: dict[str, int] = {}
        self._ops = np.zeros((capacity, 0), dtype=np.float64)
        self._src = np.full((capacity, 0), -1, dtype=np.int8)  # source code; -1 = op absent
        self.source_names: list[str] = []
        self._source_code: dict[str, int] = {}
        self.op_extrapolated: dict[str, bool] = {}
        self._last_names: tuple[str, ...] = ()
        self._last_cols = np.zeros(0, dtype=np.int64)

    def _grow(self) -> None:
        cap = self._cap * 2
        for k, a in self._cols.items():
            b = np.zeros(cap, dtype=a.dtype)
            b[: self.n] = a[: self.n]
            self._cols[k] = b
        self._batch = np.concatenate([self._batch, np.zeros_like(self._batch)])
        self._ops = np.concatenate([self._ops, np.zeros_like(self._ops)])
        self._src = np.concatenate([self._src, np.full_like(self._src, -1)])
        self._cap = cap

    def _op_column(self, name: str) -> int:
        j = self._op_index.get(name)
        if j is None:
            j = len(self.op_names)
            self.op_names.append(name)
            self._op_index[name] = j
            self._ops = np.concatenate([self._ops, np.zeros((self._cap, 1))], axis=1)
            self._src = np.concatenate([self._src, np.full((self._cap, 1), -1, np.int8)], axis=1)
            self.op_extrapolated[name] = False
        return j

    def _code(self, source: str) -> int:
        code = self._source_code.get(source)
        if code is None:
            code = self._source_code[source] = len(self.source_names)
            self.source_names.append(source)
        return code

    def append(self, rec: StepRecord) -> None:
        if self.n == self._cap:
            self._grow()
        i, c, cost = self.n, self._cols, rec.cost
        c["unit"][i] = rec.unit
        c["start_s"][i] = rec.start_s
        c["duration_s"][i] = cost.duration_s
        c["segments"][i] = int(rec.batch_per_rank.sum())
        c["decode_reqs"][i] = rec.decode_reqs
        c["prefill_tokens"][i] = rec.prefill_tokens
        c["output_tokens"][i] = rec.output_tokens
        c["accept_tokens"][i] = rec.accept_tokens
        c["imbalance"][i] = cost.rank_imbalance
        c["kv_pages"][i] = rec.kv_pages
        c["overlap_saved_s"][i] = cost.overlap_saved_s
        self._batch[i] = rec.batch_per_rank
        names = tuple(cost.ops)
        if names != self._last_names:  # op set changed: look the columns up again
            self._last_cols = np.array([self._op_column(n) for n in names], dtype=np.int64)
            self._last_names = names
        ops = list(cost.ops.values())
        self._ops[i, self._last_cols] = [op.seconds for op in ops]
        self._src[i, self._last_cols] = [self._code(op.source) for op in ops]
        if any(op.extrapolated for op in ops):
            for name, op in cost.ops.items():
                self.op_extrapolated[name] |= op.extrapolated
        self.n += 1

    def column(self, name: str) -> NDArray[Any]:
        """A trimmed, read-only copy-free view of one scalar column."""
        v = self._cols[name][: self.n]
        v.flags.writeable = False
        return v

    @property
    def batch_per_rank(self) -> NDArray[np.int32]:
        """Steps x ranks-per-unit matrix of request segments per rank."""
        return self._batch[: self.n]

    @property
    def op_seconds(self) -> NDArray[np.float64]:
        """Steps x ops matrix (op order in `op_names`)."""
        return self._ops[: self.n]

    def op_source(self, name: str) -> str:
        """The source that priced most of an op's time ('measured', 'published', 'roofline')."""
        by_src = self.op_sources(name)
        return max(sorted(by_src), key=lambda s: by_src[s]) if by_src else "roofline"

    def op_sources(self, name: str) -> dict[str, float]:
        """Seconds of an op's time by the source that priced them (whole run)."""
        j = self._op_index[name]
        codes, secs = self._src[: self.n, j], self._ops[: self.n, j]
        present = codes >= 0
        codes, secs = codes[present], secs[present]
        total = np.bincount(codes, weights=secs, minlength=len(self.source_names))
        seen = np.bincount(codes, minlength=len(self.source_names))
        return {self.source_names[k]: float(total[k]) for k in range(len(total)) if seen[k]}
