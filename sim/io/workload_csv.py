"""Read a request trace CSV: header `arrival_s,input_tokens,output_tokens[,cached_tokens]`."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from sim.engine.arrivals import Batch

REQUIRED = ("arrival_s", "input_tokens", "output_tokens")
OPTIONAL = ("cached_tokens",)


class TraceError(ValueError):
    """A trace file that cannot be read; the message names the file, the line and the column."""


def read_trace(path: str | Path) -> Batch:
    """All rows of the trace (any order; the engine sorts by arrival)."""
    p = Path(path)
    if not p.is_file():
        raise TraceError(f"{p}: trace file not found (workload.path)")
    with p.open(newline="") as f:
        reader = csv.DictReader(f)
        header = [h.strip() for h in (reader.fieldnames or [])]
        missing = [c for c in REQUIRED if c not in header]
        if missing:
            raise TraceError(
                f"{p}:1: trace header lacks {', '.join(missing)}; expected "
                f"{','.join(REQUIRED)}[,cached_tokens]"
            )
        unknown = [c for c in header if c not in REQUIRED + OPTIONAL]
        if unknown:
            raise TraceError(f"{p}:1: unknown trace columns {', '.join(unknown)}")
        cols: dict[str, list[float]] = {c: [] for c in REQUIRED + OPTIONAL}
        for line, row in enumerate(reader, start=2):
            row = {k.strip(): v for k, v in row.items() if k is not None}
            for c in REQUIRED + OPTIONAL:
                raw = (row.get(c) or "").strip()
                if not raw and c in OPTIONAL:
                    cols[c].append(0.0)
                    continue
                try:
                    value = float(raw)
                except ValueError:
                    raise TraceError(f"{p}:{line}: {c}={raw!r} is not a number") from None
                if value < 0 or (c != "arrival_s" and value != int(value)):
                    raise TraceError(
                        f"{p}:{line}: {c}={raw!r} must be a non-negative integer"
                        if c != "arrival_s"
                        else f"{p}:{line}: arrival_s < 0"
                    )
                cols[c].append(value)
    if not cols["arrival_s"]:
        raise TraceError(f"{p}: the trace has no rows")
    return Batch(
        arrival_s=np.asarray(cols["arrival_s"], dtype=np.float64),
        input_tokens=np.asarray(cols["input_tokens"], dtype=np.int64),
        output_tokens=np.asarray(cols["output_tokens"], dtype=np.int64),
        cached_tokens=np.asarray(cols["cached_tokens"], dtype=np.int64),
    )
