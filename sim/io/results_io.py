"""Write `Results` as JSON (the documented contract) or CSV (one row per deployment)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from sim.io.journal import write_atomic
from sim.metrics.results import Results


def results_dict(results: Results) -> dict[str, Any]:
    """The JSON contract: `{"scenario": ..., "deployments": [{"name": ..., ...}], ...}`.

    JSON has no NaN or infinity: a figure that is not finite (unbounded, or undefined) is
    written as null, and `unbounded` lists each such field and what it was."""
    data = results.model_dump(mode="python")
    notes = _finite(data, "")
    if notes:
        data["unbounded"] = notes
    return json.loads(json.dumps(data, allow_nan=False, default=str))


def _finite(value: Any, path: str) -> list[str]:
    """Replace non-finite floats in `value` (dicts and lists, in place) by None; the paths."""
    notes: list[str] = []
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for k, v in list(items):
        at = f"{path}.{k}" if isinstance(value, dict) and path else f"{path}[{k}]" if path else k
        if isinstance(v, float) and not math.isfinite(v):
            value[k] = None
            notes.append(f"{at}: {v} (not a finite figure: written as null)")
        elif isinstance(v, dict | list):
            notes += _finite(v, str(at))
    return notes


def write_json(results: Results, path: str | Path) -> Path:
    return write_atomic(path, json.dumps(results_dict(results), indent=2) + "\n")


def read_json(path: str | Path) -> Results:
    return Results.model_validate(json.loads(Path(path).read_text()))


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts to dotted keys; lists of named dicts (pools) keyed by their name."""
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}{k}."))
    elif isinstance(value, list) and all(isinstance(v, dict) and "name" in v for v in value):
        for v in value:
            out.update(
                flatten({k: x for k, x in v.items() if k != "name"}, f"{prefix}{v['name']}.")
            )
    elif isinstance(value, list):
        out[prefix.rstrip(".")] = ";".join(str(v) for v in value)
    else:
        out[prefix.rstrip(".")] = value
    return out


def csv_rows(results: Results) -> list[dict[str, Any]]:
    """One flat row per deployment, the scenario name first."""
    return [
        {"scenario": results.scenario, **flatten(d)} for d in results_dict(results)["deployments"]
    ]


def csv_text(results: Results) -> str:
    """The CSV `mlasim run --csv` writes: a header of every column any row has, then one row per
    deployment (None as an empty cell)."""
    rows = csv_rows(results)
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns)
    w.writeheader()
    for row in rows:
        w.writerow({k: "" if row.get(k) is None else row.get(k) for k in columns})
    return buf.getvalue()


def write_csv(results: Results, path: str | Path) -> Path:
    return write_atomic(path, csv_text(results))  # bytes: the csv module's own line endings
