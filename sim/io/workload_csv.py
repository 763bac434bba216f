"""Read a request trace CSV: header `arrival_s,input_tokens,output_tokens[,cached_tokens]`."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from sim.engine.arrivals import Batch
from sim.specs.limits import ENV, LimitError, Limits, check_text_size, current_limits

REQUIRED = ("arrival_s", "input_tokens", "output_tokens")
OPTIONAL = ("cached_tokens",)


class TraceError(ValueError):
    """A trace file that cannot be read; the message names the file, the line and the column."""


def read_trace(path: str | Path) -> Batch:
    """All rows of the trace (any order; the engine sorts by arrival). TraceError naming the
    line and column for a value that is not a finite number, a length that is not a whole count
    (input and output at least 1), a file that is not CSV text, or one over the input limits."""
    p = Path(path)
    lim = current_limits()
    try:
        if not p.is_file():
            raise TraceError(f"{p}: trace file not found (workload.path)")
        check_text_size(p.stat().st_size, str(p))
        with p.open(newline="", encoding="utf-8") as f:
            cols = _columns(p, csv.DictReader(f), lim)
    except LimitError as exc:
        raise TraceError(str(exc)) from None
    except UnicodeDecodeError:
        raise TraceError(f"{p}: not a CSV text file (it is not UTF-8); give a CSV trace") from None
    except csv.Error as exc:  # a NUL byte, a field over the csv module's size limit
        raise TraceError(f"{p}: not a readable CSV file ({exc}); give a CSV trace") from None
    except OSError as exc:
        raise TraceError(f"{p}: cannot read the trace ({exc})") from None
    if not cols["arrival_s"]:
        raise TraceError(f"{p}: the trace has no rows")
    return Batch(
        arrival_s=np.asarray(cols["arrival_s"], dtype=np.float64),
        input_tokens=np.asarray(cols["input_tokens"], dtype=np.int64),
        output_tokens=np.asarray(cols["output_tokens"], dtype=np.int64),
        cached_tokens=np.asarray(cols["cached_tokens"], dtype=np.int64),
    )


def _columns(p: Path, reader: csv.DictReader[str], lim: Limits) -> dict[str, list[float]]:
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise TraceError(
            f"{p}:1: trace header lacks {', '.join(missing)}; expected "
            f"{','.join(REQUIRED)}[,cached_tokens]"
        )
    unknown = [c for c in header if c not in REQUIRED + OPTIONAL]
    if unknown:
        raise TraceError(f"{p}:1: unknown trace columns {', '.join(unknown)[:200]}")
    cols: dict[str, list[float]] = {c: [] for c in REQUIRED + OPTIONAL}
    for line, row in enumerate(reader, start=2):
        if line - 1 > lim.max_requests:
            raise TraceError(
                f"{p}:{line}: more than {lim.max_requests:,} rows, the limit of requests per "
                f"run; cut the trace, or set {ENV}=big (mlasim --limits big)"
            )
        row = {k.strip(): v for k, v in row.items() if isinstance(k, str)}
        for c in REQUIRED + OPTIONAL:
            cols[c].append(_value(p, line, c, row.get(c), lim))
    return cols


def _value(p: Path, line: int, c: str, cell: object, lim: Limits) -> float:
    raw = cell.strip() if isinstance(cell, str) else ""
    if not raw and c in OPTIONAL:
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        raise TraceError(f"{p}:{line}: {c}={raw[:40]!r} is not a number") from None
    if not math.isfinite(value):
        raise TraceError(f"{p}:{line}: {c}={raw[:40]!r} is not a finite number")
    if c == "arrival_s":
        if value < 0:
            raise TraceError(f"{p}:{line}: arrival_s={raw[:40]} < 0; arrivals are seconds >= 0")
        return value
    least = 0 if c in OPTIONAL else 1
    if value < least or value != int(value):
        raise TraceError(
            f"{p}:{line}: {c}={raw[:40]!r} must be a whole number of tokens >= {least}"
        )
    if value > lim.max_tokens:
        raise TraceError(
            f"{p}:{line}: {c}={raw[:40]} is over the limit of {lim.max_tokens:,} tokens"
        )
    return value
