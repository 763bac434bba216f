"""A calibration run that survives being killed: finished families journalled, resumed on rerun.

Beside the profile `OUT` the run keeps `OUT.journal.jsonl` (`sim.io.journal`: one fsynced line
per kernel module that finished, with the tables, crossover points, notes, libraries and launch
cost it produced), and rewrites `OUT` atomically after each module, so a SIGKILL leaves a valid
profile of the families finished (its notes say which are missing). Run again with the same
options, the journalled modules are restored instead of timed again and only the rest run. The
journal's ids carry what decides what is measured (device and its name, grid, model, GPU, seed),
so a rerun with other options measures afresh. A run that ends with every module finished
deletes the journal: the profile is then the whole result.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from kernels_calib.context import Ctx
from sim.io.journal import Journal
from sim.specs.profile import CrossoverPoint, Factor, OpTable


@dataclass(frozen=True)
class Mark:
    """Where a module's output starts in the run's lists, taken before it runs."""

    tables: int
    notes: int
    crossover: int
    libraries: frozenset[str]


def journal_path(out: Path) -> Path:
    return out.with_name(out.name + ".journal.jsonl")


def fingerprint(**options: object) -> str:
    """A short hash of the options that decide what a run measures."""
    text = json.dumps(options, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def module_name(mod: ModuleType) -> str:
    return mod.__name__.rsplit(".", 1)[-1]


class ModuleJournal:
    """The finished modules of one calibration run (keyed by run fingerprint and module)."""

    def __init__(self, out: Path, run_id: str) -> None:
        self.path = journal_path(out)
        self.run_id = run_id
        self.journal = Journal(self.path)

    def _id(self, mod: ModuleType) -> str:
        return f"{self.run_id}:{module_name(mod)}"

    def has(self, mod: ModuleType) -> bool:
        return self._id(mod) in self.journal

    @staticmethod
    def mark(ctx: Ctx) -> Mark:
        return Mark(len(ctx.tables), len(ctx.notes), len(ctx.crossover), frozenset(ctx.libraries))

    def record(self, ctx: Ctx, mod: ModuleType, mark: Mark) -> None:
        """Journal what `mod` added to `ctx` since `mark` (it finished)."""
        rec: dict[str, Any] = {
            "id": self._id(mod),
            "tables": [t.model_dump(mode="json") for t in ctx.tables[mark.tables :]],
            "notes": ctx.notes[mark.notes :],
            "crossover": [c.model_dump(mode="json") for c in ctx.crossover[mark.crossover :]],
            "libraries": {k: v for k, v in ctx.libraries.items() if k not in mark.libraries},
            "launch": None
            if ctx.launch is None or module_name(mod) != "elementwise"
            else ctx.launch.model_dump(mode="json"),
        }
        self.journal.append(rec)

    def restore(self, ctx: Ctx, mod: ModuleType) -> None:
        """Put a journalled module's output back into `ctx`, as if it had just run."""
        rec = self.journal.done[self._id(mod)]
        ctx.tables += [OpTable.model_validate(t) for t in rec["tables"]]
        ctx.crossover += [CrossoverPoint.model_validate(c) for c in rec["crossover"]]
        ctx.notes += list(rec["notes"])
        ctx.libraries.update(rec["libraries"])
        if rec["launch"] is not None:
            ctx.launch = Factor.model_validate(rec["launch"])
        ctx.notes.append(f"{mod.__name__}: restored from {self.path.name} (an earlier run)")

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
