"""Run a grid through a backend and flatten the results: one row per point x deployment.

A row holds the point's index, each axis value under its path (`workload.rate_req_s`), the
deployment name and every field of that deployment's results, nested ones as dotted columns
(`ttft_s.p90`, `requests.completed`), as `mlasim run --csv` writes them.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sim.io.journal import Journal, write_atomic
from sim.io.results_io import flatten
from sim.search.backends import ERROR_KEY, Backend, ProgressFn
from sim.search.grid import Point

LEAD_COLUMNS = ("point", "deployment")


def run_grid(
    points: Sequence[Point], backend: Backend, progress: ProgressFn | None = None
) -> list[dict[str, Any]]:
    """Results JSON of every point, in grid order."""
    out: list[dict[str, Any] | None] = [None] * len(points)
    for i, results in backend.run([p.scenario for p in points], progress):
        out[i] = results
    missing = [i for i, r in enumerate(out) if r is None]
    if missing:
        raise RuntimeError(f"the backend returned no results for points {missing}")
    return [r for r in out if r is not None]


def point_id(point: Point) -> str:
    """A point's journal id: a digest of its whole scenario, so a rerun with the same scenario and
    --set values finds it, and any change to either runs it again."""
    return hashlib.sha256(point.scenario.model_dump_json().encode()).hexdigest()[:24]


def run_grid_journaled(
    points: Sequence[Point],
    backend: Backend,
    journal: Journal,
    progress: ProgressFn | None = None,
) -> list[dict[str, Any]]:
    """`run_grid` that appends each finished point to `journal` as it completes (flushed and
    fsynced) and skips the points already in it: a sweep killed by SIGINT or SIGKILL and run
    again loses no finished point. A point that fails on its inputs (a deployment that does not
    fit) is recorded as `{"error": message}` and the sweep goes on."""
    ids = [point_id(p) for p in points]
    todo = [i for i, pid in enumerate(ids) if pid not in journal]
    done = len(points) - len(todo)
    if progress is not None:
        progress(done, len(points))
    tick = None if progress is None else (lambda k, n: progress(done + k, len(points)))
    for j, results in backend.run([points[i].scenario for i in todo], tick, keep_going=True):
        i = todo[j]
        journal.append({"id": ids[i], "point": points[i].index, "results": results})
    return [journal.done[pid]["results"] for pid in ids]


def sweep_rows(points: Sequence[Point], results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One flat row per point x deployment, in grid order then the scenario's deployment order;
    a point that failed is one row with its `error`."""
    rows = []
    for p, res in zip(points, results, strict=True):
        if ERROR_KEY in res:
            axes = {k: _cell(v) for k, v in p.values.items()}
            rows.append({"point": p.index, **axes, "deployment": None, ERROR_KEY: res[ERROR_KEY]})
            continue
        for d in res["deployments"]:
            flat = flatten({k: v for k, v in d.items() if k != "name"})
            axes = {k: _cell(v) for k, v in p.values.items()}
            rows.append({"point": p.index, **axes, "deployment": d["name"], **flat})
    return rows


def _cell(value: Any) -> Any:
    """Axis values that are lists or mappings become JSON text, so a CSV cell holds one value."""
    return json.dumps(value) if isinstance(value, list | dict) else value


def columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    cols: list[str] = []
    for row in rows:
        cols += [k for k in row if k not in cols]
    return cols


def write_rows_csv(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=columns(rows))
    w.writeheader()
    for row in rows:
        w.writerow({k: "" if v is None else v for k, v in row.items()})
    return write_atomic(path, buf.getvalue())


def write_rows_json(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """A JSON array of the flat rows (what `pandas.read_json` reads as a table)."""
    return write_atomic(path, json.dumps(list(rows), indent=1, allow_nan=False) + "\n")
