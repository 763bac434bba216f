"""Run a grid through a backend and flatten the results: one row per point x deployment.

A row holds the point's index, each axis value under its path (`workload.rate_req_s`), the
deployment name and every field of that deployment's results, nested ones as dotted columns
(`ttft_s.p90`, `requests.completed`), as `mlasim run --csv` writes them.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sim.io.results_io import flatten
from sim.search.backends import Backend, ProgressFn
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


def sweep_rows(points: Sequence[Point], results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One flat row per point x deployment, in grid order then the scenario's deployment order."""
    rows = []
    for p, res in zip(points, results, strict=True):
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
    p = Path(path)
    with p.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns(rows))
        w.writeheader()
        for row in rows:
            w.writerow({k: "" if v is None else v for k, v in row.items()})
    return p


def write_rows_json(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """A JSON array of the flat rows (what `pandas.read_json` reads as a table)."""
    p = Path(path)
    p.write_text(json.dumps(list(rows), indent=1) + "\n")
    return p
