"""Measured deployment rows: read aiconfigurator's `silicon_sample.csv` (or a CSV of the same
columns) and check each row.

A CSV without one of the needed columns is refused, naming the column. A row whose fields do not
parse (a number that is not one, no `silicon_concurrency=N` in its source) is not dropped: it is
returned as a `Malformed` with its id and the field at fault, and the report counts it.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

AIC_PACKAGE = "aiconfigurator_core"
AIC_CSV = "systems/silicon_sample.csv"
AIC_INSTALL_HINT = "pip install 'mlasim[validate]' (aiconfigurator-core, Apache-2.0)"

LAYOUT_FIELDS = ("tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
POOL_FIELDS = ("batch_size", "num_workers", *LAYOUT_FIELDS)
REQUIRED_COLUMNS = (
    "id",
    "silicon_data_source",
    "backend",
    "backend_version",
    "model_path",
    "system",
    "precision",
    "mode",
    "isl",
    "osl",
    "gemm_quant_mode",
    "moe_quant_mode",
    "batch_size",
    *LAYOUT_FIELDS,
    *(f"{pool}_{f}" for pool in ("prefill", "decode") for f in POOL_FIELDS),
    "silicon_ttft_ms",
    "silicon_tpot_ms",
)
_CONCURRENCY = re.compile(r"silicon_concurrency=(\d+)")


class RowsError(ValueError):
    """A CSV that cannot be read as measured rows (missing file or column)."""


@dataclass(frozen=True)
class Pool:
    """One pool's fields as the CSV gives them (None where the cell is empty)."""

    batch_size: int | None
    num_workers: int | None
    tp_size: int | None
    pp_size: int | None
    attention_dp_size: int | None
    moe_tp_size: int | None
    moe_ep_size: int | None


@dataclass(frozen=True)
class MeasuredRow:
    """One measured deployment: what ran, how it was driven, and the measured TTFT and TPOT."""

    id: str
    backend: str
    backend_version: str
    model_path: str
    system: str
    precision: str
    mode: str
    isl: int
    osl: int
    gemm_quant_mode: str
    moe_quant_mode: str
    concurrency: int
    agg: Pool  # the agg-mode fields (num_workers always None)
    prefill: Pool
    decode: Pool
    ttft_ms: float
    tpot_ms: float
    source: str

    @property
    def measured_tok_s(self) -> float:
        """Output tokens per second of the whole deployment, as a closed loop of `concurrency`
        users each waiting TTFT + (OSL - 1) x TPOT per request of OSL tokens."""
        return closed_loop_tok_s(self.concurrency, self.osl, self.ttft_ms, self.tpot_ms)


@dataclass(frozen=True)
class Malformed:
    """A row that could not be read: its id (or line) and what is wrong."""

    id: str
    problem: str
    system: str = ""  # raw cells, so filters apply to a row that could not be read
    model_path: str = ""
    backend: str = ""
    mode: str = ""


def closed_loop_tok_s(concurrency: int, osl: int, ttft_ms: float, tpot_ms: float) -> float:
    """Output tok/s of `concurrency` users in a closed loop: concurrency x OSL per request time."""
    request_s = (ttft_ms + (osl - 1) * tpot_ms) / 1000.0
    return concurrency * osl / request_s


def aic_csv_path() -> Path:
    """The installed aiconfigurator-core's silicon_sample.csv; RowsError saying how to install."""
    try:
        root = resources.files(AIC_PACKAGE)
    except ModuleNotFoundError:
        raise RowsError(f"the aic dataset needs aiconfigurator-core: {AIC_INSTALL_HINT}") from None
    return Path(str(root.joinpath(AIC_CSV)))


def _float(raw: str, field: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{field}={raw!r} is not a number") from None


def _int(raw: str, field: str) -> int | None:
    if raw.strip() == "":
        return None
    v = _float(raw, field)
    if not math.isfinite(v) or v != int(v) or v < 0:
        raise ValueError(f"{field}={raw!r} is not a non-negative whole number")
    return int(v)


def _pos_float(raw: str, field: str) -> float:
    v = _float(raw, field) if raw.strip() else math.nan
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{field}={raw!r} is not a positive number")
    return v


def _pool(rec: dict[str, str], prefix: str) -> Pool:
    vals = {}
    for f in POOL_FIELDS:
        col = f"{prefix}{f}"
        vals[f] = _int(rec[col], col) if col in rec else None
    return Pool(**vals)


def parse_row(rec: dict[str, str]) -> MeasuredRow:
    """One CSV record as a MeasuredRow; ValueError naming the field that does not parse."""
    source = rec["silicon_data_source"]
    m = _CONCURRENCY.search(source)
    if m is None:
        raise ValueError("silicon_data_source has no 'silicon_concurrency=N'")
    isl, osl = _int(rec["isl"], "isl"), _int(rec["osl"], "osl")
    if not isl or not osl:
        raise ValueError("isl and osl must be positive whole numbers")
    return MeasuredRow(
        id=rec["id"],
        backend=rec["backend"].strip(),
        backend_version=rec["backend_version"].strip(),
        model_path=rec["model_path"].strip(),
        system=rec["system"].strip(),
        precision=rec["precision"].strip(),
        mode=rec["mode"].strip(),
        isl=isl,
        osl=osl,
        gemm_quant_mode=rec["gemm_quant_mode"].strip(),
        moe_quant_mode=rec["moe_quant_mode"].strip(),
        concurrency=int(m.group(1)),
        agg=_pool(rec, ""),
        prefill=_pool(rec, "prefill_"),
        decode=_pool(rec, "decode_"),
        ttft_ms=_pos_float(rec["silicon_ttft_ms"], "silicon_ttft_ms"),
        tpot_ms=_pos_float(rec["silicon_tpot_ms"], "silicon_tpot_ms"),
        source=source,
    )


def read_rows(path: str | Path) -> tuple[list[MeasuredRow], list[Malformed]]:
    """Every row of the CSV, read or reported: (rows, malformed rows with their ids).

    Raises RowsError for a missing file or a header that lacks a needed column (named)."""
    p = Path(path)
    if not p.is_file():
        raise RowsError(f"{p}: no such CSV file")
    with p.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            raise RowsError(
                f"{p}: missing column{'s' * (len(missing) > 1)} {', '.join(missing)} "
                f"(a measured-rows CSV has the columns of aiconfigurator's silicon_sample.csv)"
            )
        rows: list[MeasuredRow] = []
        bad: list[Malformed] = []
        for line, rec in enumerate(reader, start=2):
            rid = (rec.get("id") or "").strip() or f"line {line}"
            if None in rec or any(v is None for v in rec.values()):
                bad.append(
                    Malformed(rid, f"line {line} has a different number of fields", *_raw(rec))
                )
                continue
            try:
                rows.append(parse_row(rec))
            except ValueError as exc:
                bad.append(Malformed(rid, f"line {line}: {exc}", *_raw(rec)))
    return rows, bad


def _raw(rec: dict[str, str]) -> tuple[str, str, str, str]:
    cells = ("system", "model_path", "backend", "mode")
    return tuple(str(rec.get(c) or "").strip() for c in cells)  # type: ignore[return-value]
