"""Per-request records of a run: one row per arrived request, as CSV or Parquet.

The summary's percentiles come from these rows (`sim.metrics.summary`), so a user can rebuild
them, or any other statistic, in their own tools. The first four columns are the trace format's
(`arrival_s,input_tokens,output_tokens,cached_tokens`, `sim.io.workload_csv`): selecting them
turns a run's requests back into a replayable trace. Times are seconds; a time a request has not
reached yet (no first token, not finished) is empty in CSV and null in Parquet. `after_warmup`
marks the rows the summary's latency statistics use.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from sim.engine import SimOutput
from sim.engine.requests import Phase

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
    t, n = out.table, out.table.size
    arrival, first, finish = t.arrival_s[:n], t.first_token_s[:n], t.finish_s[:n]
    out_len = t.output_tokens[:n]
    done = t.phase[:n] == Phase.DONE
    tpot = np.where(done & (out_len > 1), (finish - first) / np.maximum(out_len - 1, 1), np.nan)
    return {
        "arrival_s": arrival.copy(),
        "input_tokens": t.input_tokens[:n].copy(),
        "output_tokens": out_len.copy(),
        "cached_tokens": t.cached_tokens[:n].copy(),
        "deployment": np.full(n, out.deployment.name, dtype=object),
        "request_id": np.arange(n, dtype=np.int64),
        "status": STATUS[t.phase[:n]].astype(object),
        "after_warmup": arrival >= out.warmup_s,
        "first_token_s": first.copy(),
        "finish_s": finish.copy(),
        "ttft_s": first - arrival,
        "tpot_s": tpot,
        "e2e_s": finish - arrival,
        "generated_tokens": t.generated[:n].copy(),
        "preemptions": t.preemptions[:n].copy(),
        "rank": t.rank[:n].copy(),
    }


def _cell(v: object) -> object:
    if isinstance(v, float) and math.isnan(v):
        return ""
    return v


def _write_csv(parts: list[dict[str, np.ndarray]], path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for cols in parts:
            rows = zip(*(cols[c].tolist() for c in COLUMNS), strict=True)
            w.writerows([_cell(v) for v in row] for row in rows)


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
    pq.write_table(pa.concat_tables(tables), path)


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
