"""Per-request records of a run: one row per arrived request, as CSV or Parquet.

The latency columns (`ttft_s`, `tpot_s`, `e2e_s`) and `after_warmup` come from
`sim.metrics.request_latencies`, the computation the summary's percentiles and goodput use, so a
user can rebuild them, or any other statistic, in their own tools. Over the `after_warmup` rows:
TPOT percentiles are `numpy.percentile` of the `done` rows' `tpot_s`; TTFT is over the rows with
a `first_token_s`, E2E over the `done` rows, and in both the other rows that were not rejected
enter right-censored at `end - arrival_s` (Kaplan-Meier, `sim.metrics.stats.censored_quantile`;
the mean is over the observed values). ITL comes from the step logs, not from these rows.

The first four columns are the trace format's (`arrival_s,input_tokens,output_tokens,
cached_tokens`, `sim.io.workload_csv`): selecting them turns a run's requests back into a
replayable trace. Times are seconds; a time a request has not reached yet (no first token, not
finished) is empty in CSV and null in Parquet.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from sim.engine import SimOutput
from sim.engine.requests import Phase
from sim.io.journal import write_atomic
from sim.metrics.requests import request_latencies

COLUMNS = (
    "arrival_s", "input_tokens", "output_tokens", "cached_tokens", "deployment", "request_id",
    "status", "after_warmup", "first_token_s", "finish_s", "ttft_s", "tpot_s", "e2e_s",
    "generated_tokens", "preemptions", "rank",
)  # fmt: skip
STATUS = np.array([p.name.lower() for p in Phase])  # indexed by phase code
FORMATS = (".csv", ".parquet")


def request_columns(out: SimOutput) -> dict[str, np.ndarray]:
    """Every arrived request of one deployment's run, column by column (row = request id).

    `tpot_s` is (finish - first token) / (output tokens - 1), as in the summary: empty for a
    one-token output or an unfinished request. `rank` is the rank the request was on last (the
    decode pool's for a PD pair); -1 if it never reached one.
    """
    t, n = out.record.requests, out.record.requests.size
    lat = request_latencies(out.record)
    return {
        "arrival_s": t.arrival_s[:n].copy(),
        "input_tokens": t.input_tokens[:n].copy(),
        "output_tokens": t.output_tokens[:n].copy(),
        "cached_tokens": t.cached_tokens[:n].copy(),
        "deployment": np.full(n, out.deployment.name, dtype=object),
        "request_id": np.arange(n, dtype=np.int64),
        "status": STATUS[t.phase[:n]].astype(object),
        "after_warmup": lat.after_warmup,
        "first_token_s": t.first_token_s[:n].copy(),
        "finish_s": t.finish_s[:n].copy(),
        "ttft_s": lat.ttft_s,
        "tpot_s": lat.tpot_s,
        "e2e_s": lat.e2e_s,
        "generated_tokens": t.generated[:n].copy(),
        "preemptions": t.preemptions[:n].copy(),
        "rank": t.rank[:n].copy(),
    }


def _cell(v: object) -> object:
    if isinstance(v, float) and math.isnan(v):
        return ""
    return v


def _write_csv(parts: list[dict[str, np.ndarray]], path: Path) -> None:
    """Written whole under a temporary name and renamed: a killed run leaves no truncated file
    that looks complete."""
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(COLUMNS)
    for cols in parts:
        rows = zip(*(cols[c].tolist() for c in COLUMNS), strict=True)
        w.writerows([_cell(v) for v in row] for row in rows)
    write_atomic(path, buf.getvalue())


def _write_parquet(parts: list[dict[str, np.ndarray]], path: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ValueError(
            f"{path}: writing Parquet needs pyarrow (pip install pyarrow); or write a .csv"
        ) from None
    tables = [
        pa.table({c: pa.array(cols[c], from_pandas=True) for c in COLUMNS}) for cols in parts
    ]  # from_pandas: NaN times become nulls
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        pq.write_table(pa.concat_tables(tables), tmp)
        os.replace(tmp, path)  # atomic: a reader never sees half a file
    finally:
        tmp.unlink(missing_ok=True)


def write_requests(outputs: Sequence[SimOutput], path: str | Path) -> Path:
    """Every deployment's requests into one file; the format follows the suffix."""
    p = Path(path)
    if p.suffix not in FORMATS:
        raise ValueError(
            f"{p}: per-request records are written as {' or '.join(FORMATS)}; "
            f"got {p.suffix or 'no suffix'}"
        )
    parts = [request_columns(o) for o in outputs]
    if p.suffix == ".csv":
        _write_csv(parts, p)
    else:
        _write_parquet(parts, p)
    return p
