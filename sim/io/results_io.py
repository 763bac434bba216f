"""Write `Results` as JSON (the documented contract) or CSV (one row per deployment)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from sim.metrics.results import Results


def results_dict(results: Results) -> dict[str, Any]:
    """The JSON contract: `{"scenario": ..., "deployments": [{"name": ..., ...}], ...}`."""
    return results.model_dump(mode="json")


def write_json(results: Results, path: str | Path) -> Path:
    p = Path(path)
    p.write_text(json.dumps(results_dict(results), indent=2) + "\n")
    return p


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
    p = Path(path)
    with p.open("w", newline="") as f:  # the csv module's own line endings, untranslated
        f.write(csv_text(results))
    return p
