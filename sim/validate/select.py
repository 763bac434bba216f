"""From a CSV and filters to a finished validation: read, map, run, summarise."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.search.backends import Backend
from sim.validate.mapping import MALFORMED, SYSTEMS, Mapped, Uncovered, duplicates, map_row
from sim.validate.report import summary
from sim.validate.rows import Malformed, MeasuredRow, aic_csv_path, read_rows
from sim.validate.runner import ProgressFn, run_rows
from sim.validate.workload import AIPERF_COUNTS, BenchCounts


@dataclass(frozen=True)
class Filters:
    """Which rows to validate (None: all); `limit` keeps the first N matching rows."""

    model: str | None = None  # a substring of model_path, case-insensitive
    gpu: str | None = None  # GPU names ('h200' or the CSV's 'h200_sxm'), comma-separated
    engine: str | None = None
    mode: str | None = None
    ids: tuple[str, ...] | None = None
    limit: int | None = None

    def keep(self, r: MeasuredRow | Malformed) -> bool:
        if self.ids is not None and r.id not in self.ids:
            return False
        if self.model and self.model.lower() not in r.model_path.lower():
            return False
        if self.gpu and not {r.system, SYSTEMS.get(r.system)} & set(self.gpu.split(",")):
            return False
        if self.engine and r.backend != self.engine:
            return False
        return not (self.mode and r.mode != self.mode)

    def keep_malformed(self, b: Malformed) -> bool:
        """A malformed row is kept unless a filter it can be read for excludes it."""
        return self.ids is None and self.keep(b)


def dataset_path(dataset: str) -> Path:
    """'aic' is the installed aiconfigurator-core's sample; anything else a CSV path."""
    return aic_csv_path() if dataset == "aic" else Path(dataset)


def plan(
    path: str | Path, f: Filters, counts: BenchCounts = AIPERF_COUNTS
) -> tuple[list[Mapped], list[Uncovered], int]:
    """(rows to simulate, each benchmark run with `counts`; rows not simulated with their
    reasons; rows selected)."""
    rows, bad = read_rows(path)
    # over the whole file (a repeated row's kept id may be filtered out), keeping runnable ones
    runnable = {r.id for r in rows if isinstance(map_row(r), Mapped)}
    dup = duplicates(rows, runnable)
    chosen = [r for r in rows if f.keep(r)]
    if f.limit is not None:
        chosen = chosen[: f.limit]
    mapped: list[Mapped] = []
    uncovered = [Uncovered(b.id, MALFORMED, b.problem) for b in bad if f.keep_malformed(b)]
    total = len(chosen) + len(uncovered)  # a malformed row cannot be filtered: it counts
    for r in chosen:
        m = map_row(r, dup.get(r.id), counts)
        if isinstance(m, Mapped):
            mapped.append(m)
        else:
            uncovered.append(m)
    return mapped, uncovered, total


def validate(
    path: str | Path,
    f: Filters,
    out_dir: str | Path,
    backend: Backend,
    progress: ProgressFn | None = None,
    counts: BenchCounts = AIPERF_COUNTS,
) -> dict[str, Any]:
    """Run (or resume) the selected rows, each benchmark run with `counts`, and return the
    report's summary (a row the journal holds with other counts is run again)."""
    mapped, uncovered, total = plan(path, f, counts)
    journal = run_rows(mapped, out_dir, backend, progress)
    ids = {m.row.id for m in mapped}
    return summary(total, uncovered, [r for r in journal if r["id"] in ids])


def ids_file(path: str | Path) -> tuple[str, ...]:
    """Row ids, one a line ('#' starts a comment)."""
    out: Sequence[str] = [
        line.split("#", 1)[0].strip() for line in Path(path).read_text().splitlines()
    ]
    return tuple(i for i in out if i)
