"""Append-only record of every step a pool ran: when, how long, what it held, where time went.

One `StepLog` per pool (its ranks per unit fix the width of the per-rank batch matrix). Columns
grow by doubling; `view()` returns trimmed read-only arrays for `sim.metrics` and the trace.
Per-request timestamps (arrival, first token, finish) live in the `RequestTable`. The op
columns hold each op's time less the launches of its roofline-priced kernels, which are summed
in a column of their own, `LAUNCH_ROW` (`OpTime.launches` x `StepCost.launch_s`).
"""

from __future__ import annotations

from itertools import groupby
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from sim.cost.batch import StepCost
from sim.cost.rate import LAUNCH_ROW, OpTime
from sim.specs.limits import check_step_log

_SCALARS: dict[str, type] = {
    "unit": np.int32,
    "start_s": np.float64,
    "duration_s": np.float64,
    "segments": np.int64,  # request segments in the step (all ranks)
    "decode_reqs": np.int64,  # decode/verify segments
    "prefill_tokens": np.int64,  # prefill/extend tokens computed
    "output_tokens": np.int64,  # tokens emitted to users
    "accept_tokens": np.int64,  # sum over decode segments of accepted drafts + 1 (untruncated)
    "imbalance": np.float64,  # max/mean of the ranks' own time (idle ranks 0), not attention only
    "kv_pages": np.int64,  # KV pages in use on the unit's ranks after the step
    "overlap_saved_s": np.float64,
}


# the StepRecord figures `append` keeps as they come, in its tuple's order
_PENDING_COLUMNS = (
    "unit", "start_s", "duration_s", "decode_reqs", "prefill_tokens", "output_tokens",
    "accept_tokens", "kv_pages", "overlap_saved_s",
)  # fmt: skip
_FLUSH_STEPS = 256  # steps kept in lists before they are written to the columns
_RECENT_ROWS = 8  # ops dicts whose rows the log keeps (`StepLog._recent_row`)
# an ops dict's row: the dict, its launch figure, op names, columns, sources, source codes, seconds
_Row = tuple[
    dict[str, OpTime], float, tuple[str, ...], NDArray[np.int64], list[str], NDArray[np.int8],
    list[float],
]  # fmt: skip


class StepRecord(NamedTuple):
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


def rank_imbalance(rank_own_s: NDArray[np.float64]) -> float:
    """`StepCost.rank_imbalance` (max / mean, 1.0 when idle) without `np.mean`'s call overhead.

    `x.sum() / x.size` is the same pairwise sum and the same division `np.mean` performs.
    """
    x, n = rank_own_s, rank_own_s.size
    if n == 1:  # one rank (a tensor-parallel unit): its max over its mean, x / x
        return 1.0
    if x.dtype != np.float64:  # np.mean accumulates other dtypes differently
        mean = float(x.mean()) if n else 0.0
    else:  # x.sum() and x.max() without their Python-level wrappers: the same reductions
        mean = float(np.add.reduce(x)) / n if n else 0.0
    return float(np.maximum.reduce(x)) / mean if mean > 0 else 1.0


def _same_columns(e: tuple[NDArray[np.int64], NDArray[np.int8], list[float]]) -> tuple[int, int]:
    """A pending step's op columns and source codes by identity (steps share the arrays)."""
    return id(e[0]), id(e[1])


def _grown(a: NDArray[Any], cap: int, n: int) -> NDArray[Any]:
    """`a` with room for `cap` rows, its first `n` rows kept and the rest zero."""
    b = np.zeros((cap, *a.shape[1:]), dtype=a.dtype)
    b[:n] = a[:n]
    return b


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
        self._src = np.zeros((capacity, 0), dtype=np.int8)  # source code + 1; 0 = op absent
        self.source_names: list[str] = []
        self._source_code: dict[str, int] = {}
        self.op_extrapolated: dict[str, bool] = {}
        self._last_names: tuple[str, ...] = ()
        self._last_cols = np.zeros(0, dtype=np.int64)
        self._last_sources: list[str] = []
        self._last_codes = np.zeros(0, dtype=np.int8)
        self._last_ops: dict[str, OpTime] | None = None  # the previous step's ops, its row
        self._last_launch = 0.0
        self._last_seconds: list[float] = []
        # each op set's columns and each source sequence's codes, once: steps alternate
        # between a few (decode-only and mixed steps price different ops)
        self._cols_of: dict[tuple[str, ...], NDArray[np.int64]] = {}
        self._codes_of: dict[tuple[str, ...], NDArray[np.int8]] = {}
        # the rows of the last few ops dicts (prices memoised whole recur: a one-rank unit's
        # decode and chunk steps take turns), by the dict's id, each holding its dict
        self._recent: dict[int, _Row] = {}
        self._written = 0  # rows written to the columns; rows up to n wait in the lists below
        self._pending: list[tuple[float, ...]] = []
        self._pending_batch: list[NDArray[np.int64]] = []
        self._pending_own: list[NDArray[np.float64]] = []
        self._pending_ops: list[tuple[NDArray[np.int64], NDArray[np.int8], list[float]]] = []

    def _grow(self) -> None:
        # fresh zeroed memory is mapped lazily: only the rows copied here and appended later
        # are ever touched (no zero-filling of the new half)
        cap, n = self._cap * 2, self._written
        check_step_log(cap, self.ranks_per_unit, len(self.op_names))  # bounded before allocating
        for k, a in self._cols.items():
            self._cols[k] = _grown(a, cap, n)
        self._batch, self._ops, self._src = (
            _grown(self._batch, cap, n), _grown(self._ops, cap, n), _grown(self._src, cap, n),
        )  # fmt: skip
        self._cap = cap

    def _op_column(self, name: str) -> int:
        j = self._op_index.get(name)
        if j is None:
            j = len(self.op_names)
            self.op_names.append(name)
            self._op_index[name] = j
            self._ops = np.concatenate([self._ops, np.zeros((self._cap, 1))], axis=1)
            self._src = np.concatenate([self._src, np.zeros((self._cap, 1), np.int8)], axis=1)
            self.op_extrapolated[name] = False
        return j

    def _code(self, source: str) -> int:
        code = self._source_code.get(source)
        if code is None:
            code = self._source_code[source] = len(self.source_names)
            self.source_names.append(source)
        return code

    def append(self, rec: StepRecord) -> None:
        """Keep one step. Its figures wait in Python lists and are written to the columns in
        blocks (`_flush`), which every read of the log does first: a step costs a few list
        appends instead of a dozen numpy writes of one element each."""
        cost = rec.cost
        self._pending.append((
            rec.unit, rec.start_s, cost.duration_s, rec.decode_reqs, rec.prefill_tokens,
            rec.output_tokens, rec.accept_tokens, rec.kv_pages, cost.overlap_saved_s,
        ))  # fmt: skip
        self._pending_batch.append(rec.batch_per_rank)
        self._pending_own.append(cost.rank_own_s)
        if cost.ops is not self._last_ops or cost.launch_s != self._last_launch:
            self._recent_row(cost)  # else the previous step's ops (a price memoised whole)
        self._pending_ops.append((self._last_cols, self._last_codes, self._last_seconds))
        self.n += 1
        if len(self._pending) >= _FLUSH_STEPS:
            self._flush()

    def _recent_row(self, cost: StepCost) -> None:
        """The row of a step whose ops dict is one of the last few steps' (its row kept),
        else built (`_row`); either becomes the last row."""
        row = self._recent.get(id(cost.ops))
        if row is None or row[0] is not cost.ops or row[1] != cost.launch_s:
            self._row(cost)
            if len(self._recent) >= _RECENT_ROWS:
                del self._recent[next(iter(self._recent))]  # the oldest
            self._recent[id(cost.ops)] = (
                cost.ops, cost.launch_s, self._last_names, self._last_cols,
                self._last_sources, self._last_codes, self._last_seconds,
            )  # fmt: skip
            return
        _, self._last_launch, names, cols, sources, codes, seconds = row
        self._last_ops, self._last_names, self._last_cols = cost.ops, names, cols
        self._last_sources, self._last_codes, self._last_seconds = sources, codes, seconds

    def _row(self, cost: StepCost) -> None:
        """A step's op row: its seconds (launches apart), columns and source codes, kept as
        the last row's (`append`)."""
        ops = cost.ops
        vals = ops.values()
        names = tuple(ops)
        seconds = [op.seconds for op in vals]
        sources = [op.source for op in vals]
        if cost.launch_s > 0.0:  # roofline-priced kernels' launches: a row of their own
            launches = [op.launches for op in vals]
            n = sum(launches)
            if n > 0.0:
                at = cost.launch_s
                seconds = [s - k * at for s, k in zip(seconds, launches, strict=True)]
                seconds.append(n * at)
                names += (LAUNCH_ROW,)
                sources.append(cost.launch_label)
        if names != self._last_names:  # op set changed: its columns, looked up once
            cols = self._cols_of.get(names)
            if cols is None:
                cols = np.array([self._op_column(n) for n in names], dtype=np.int64)
                self._cols_of[names] = cols
            self._last_cols, self._last_names = cols, names
        if sources != self._last_sources:  # steps mostly repeat the previous step's sources
            key = tuple(sources)
            codes = self._codes_of.get(key)
            if codes is None:
                codes = np.array([self._code(s) + 1 for s in sources], dtype=np.int8)
                self._codes_of[key] = codes
            self._last_codes, self._last_sources = codes, sources
        if any([op.extrapolated for op in vals]):
            for name, op in ops.items():
                self.op_extrapolated[name] |= op.extrapolated
        # held, so that `is` cannot meet another dict at the same address
        self._last_ops, self._last_launch, self._last_seconds = ops, cost.launch_s, seconds

    def _flush(self) -> None:
        """Write the pending steps' figures to the columns (rows `_written` .. n - 1)."""
        k = len(self._pending)
        if k == 0:
            return
        while self._cap < self.n:
            self._grow()
        i0, i1, c = self._written, self.n, self._cols
        rows = list(zip(*self._pending, strict=True))
        for name, col in zip(_PENDING_COLUMNS, rows, strict=True):
            c[name][i0:i1] = col
        batch = self._batch[i0:i1]
        batch[:] = self._pending_batch
        c["segments"][i0:i1] = batch.sum(axis=1)
        c["imbalance"][i0:i1] = [rank_imbalance(x) for x in self._pending_own]
        j = i0
        # runs of steps with the same op columns and sources: one 2-D write each
        for _, run in groupby(self._pending_ops, key=_same_columns):
            steps = list(run)
            cols, codes, _ = steps[0]
            seconds = [e[2] for e in steps]
            m = len(seconds)
            self._ops[j : j + m, cols] = seconds
            self._src[j : j + m, cols] = codes
            j += m
        self._pending.clear()
        self._pending_batch.clear()
        self._pending_own.clear()
        self._pending_ops.clear()
        self._written = i1

    def column(self, name: str) -> NDArray[Any]:
        """A trimmed, read-only copy-free view of one scalar column."""
        self._flush()
        v = self._cols[name][: self.n]
        v.flags.writeable = False
        return v

    @property
    def batch_per_rank(self) -> NDArray[np.int32]:
        """Steps x ranks-per-unit matrix of request segments per rank."""
        self._flush()
        return self._batch[: self.n]

    @property
    def op_seconds(self) -> NDArray[np.float64]:
        """Steps x ops matrix (op order in `op_names`)."""
        self._flush()
        return self._ops[: self.n]

    def op_source(self, name: str) -> str:
        """The source that priced most of an op's time ('measured', 'published', 'roofline')."""
        by_src = self.op_sources(name)
        return max(sorted(by_src), key=lambda s: by_src[s]) if by_src else "roofline"

    def op_sources(self, name: str) -> dict[str, float]:
        """Seconds of an op's time by the source that priced them (whole run)."""
        self._flush()
        j = self._op_index[name]
        codes, secs = self._src[: self.n, j] - 1, self._ops[: self.n, j]
        present = codes >= 0
        codes, secs = codes[present], secs[present]
        total = np.bincount(codes, weights=secs, minlength=len(self.source_names))
        seen = np.bincount(codes, minlength=len(self.source_names))
        return {self.source_names[k]: float(total[k]) for k in range(len(total)) if seen[k]}
