"""Checking scenario files: run them, evaluate their `expect:` lines, compare golden summaries.

A scenario file may carry, next to what the simulator reads, three check blocks:
- `expect:` a list of boolean expressions over the results (see `sim.checks.expect`);
- `probes:` named cost-model facts those expressions may use (see `sim.checks.probes`);
- `golden:` tolerances for the stored golden summary (see `sim.checks.golden`).

`check_paths` finds every scenario under the given paths (YAML mappings with `deployments`,
`model` or `workload` at the top; other files are listed as skipped), runs them in parallel
processes with the `Runner` it is given (the `mlasim check` command, `sim.cli.check`, passes one
that simulates; tests pass fakes), and returns a `CheckReport`. Nothing is written unless
`update_golden` is set.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from sim.checks import expect, golden
from sim.checks.namespace import ExpectError, build_namespace, format_value
from sim.checks.probes import ProbeError, compute_probes
from sim.io.yaml_where import load_yaml, where

SCENARIO_KEYS = ("deployments", "model", "workload")

# (scenario file, its text) -> Results JSON dict
Runner = Callable[[Path, str], Mapping[str, Any]]


@dataclass(frozen=True, kw_only=True)
class CheckRow:
    """One expectation, one golden metric, or one error that stopped a scenario."""

    kind: Literal["expect", "golden", "error"]
    label: str
    ok: bool
    actual: str = ""
    expected: str = ""
    detail: str = ""


@dataclass(frozen=True, kw_only=True)
class ScenarioReport:
    """Everything checked for one scenario file."""

    path: Path
    name: str
    rows: tuple[CheckRow, ...]
    wall_s: float
    summary: dict[str, float] | None = None  # what --update-golden writes

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)

    def count(self, kind: str) -> tuple[int, int]:
        rows = [r for r in self.rows if r.kind == kind]
        return sum(r.ok for r in rows), len(rows)


@dataclass(frozen=True, kw_only=True)
class CheckReport:
    """All scenarios checked, plus files found but skipped as not scenarios."""

    scenarios: tuple[ScenarioReport, ...]
    skipped: tuple[Path, ...] = ()
    update_golden: bool = False
    updated: tuple[Path, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return bool(self.scenarios) and all(s.ok for s in self.scenarios)


def discover(paths: Iterable[Path]) -> tuple[list[Path], list[Path]]:
    """(scenario files, skipped YAML files) under `paths`; a named file must be a scenario."""
    found: list[Path] = []
    skipped: list[Path] = []
    for root in paths:
        if not root.exists():
            raise FileNotFoundError(f"{root}: no such file or folder")
        if root.is_file():
            found.append(root)
            continue
        for p in sorted(root.rglob("*")):
            if p.suffix in (".yaml", ".yml") and p.is_file():
                (found if _looks_like_scenario(p) else skipped).append(p)
    return sorted(set(found)), sorted(set(skipped))


def _looks_like_scenario(path: Path) -> bool:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        return True  # a broken scenario must fail loudly, not vanish
    return isinstance(data, dict) and any(k in data for k in SCENARIO_KEYS)


def run_one(path: Path, runner: Runner, update_golden: bool = False) -> ScenarioReport:
    """Check one scenario file. Errors become rows, never exceptions."""
    start = time.perf_counter()
    name = path.stem
    rows: list[CheckRow] = []
    summary = None
    try:
        text = path.read_text()
        raw = load_yaml(path, text)
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: a scenario is a YAML mapping, got {type(raw).__name__}")
        name = str(raw.get("name", name))
        exprs, policy = _check_blocks(path, text, raw)
        probe_values = _probes(path, text, raw.get("probes"), raw.get("profile"))
        results = runner(path, text)
        ns = build_namespace(results, probe_values)
        rows += [_expect_row(e, ns) for e in exprs]
        if policy.enabled:
            summary = golden.summarize(results, policy)
            rows += _golden_rows(path, summary, policy, update_golden)
    except Exception as exc:  # any failure is reported in the table, with its message
        rows.append(CheckRow(kind="error", label=type(exc).__name__, ok=False, detail=str(exc)))
    return ScenarioReport(
        path=path, name=name, rows=tuple(rows), wall_s=time.perf_counter() - start, summary=summary
    )


def _check_blocks(
    path: Path, text: str, raw: Mapping[str, Any]
) -> tuple[list[str], golden.GoldenPolicy]:
    exprs = raw.get("expect") or []
    if not isinstance(exprs, list):
        raise ValueError(f"{where(path, text, ['expect'])}: `expect` must be a list of strings")
    for i, e in enumerate(exprs):
        try:
            expect.parse(e)
        except ExpectError as exc:
            raise ExpectError(f"{where(path, text, ['expect', i])}: expect[{i}]: {exc}") from None
    try:
        policy = golden.GoldenPolicy.model_validate(raw.get("golden") or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ["golden", *first["loc"]]
        dotted = ".".join(str(x) for x in loc)
        raise ValueError(f"{where(path, text, loc)}: {dotted}: {first['msg']}") from None
    return list(exprs), policy


def _probes(path: Path, text: str, raw: Any, profile: Any) -> dict[str, Any]:
    if raw is not None and not isinstance(raw, dict):
        raise ProbeError(f"{where(path, text, ['probes'])}: `probes` must be a mapping")
    try:
        return compute_probes(raw, None if profile is None else str(profile))
    except ProbeError as exc:
        at = where(path, text, ["probes", exc.probe])
        raise ProbeError(f"{at}: {exc}", exc.probe) from None


def _expect_row(expr: str, ns: Mapping[str, Any]) -> CheckRow:
    try:
        ok = expect.check(expr, ns)
        operands = expect.sides(expr, ns)
    except ExpectError as exc:
        return CheckRow(kind="expect", label=expr, ok=False, detail=str(exc))
    actual = expected = ""
    if operands is not None:
        actual = format_value(operands[0])
        expected = ", ".join(format_value(v) for v in operands[1:])
    return CheckRow(
        kind="expect",
        label=expr,
        ok=ok,
        actual=actual,
        expected=expected,
        detail="" if ok else expect.explain(expr, ns),
    )


def _golden_rows(
    path: Path, summary: dict[str, float], policy: golden.GoldenPolicy, update: bool
) -> list[CheckRow]:
    unused = [t for t in policy.tolerances if not any(_tol_matches(t, m) for m in summary)]
    if unused:
        raise ValueError(
            f"{path}: golden.tolerances {unused} match no stored metric; "
            f"metrics are {', '.join(summary)}"
        )
    gpath = golden.golden_path(path)
    stored = None if update else golden.read_golden(gpath)
    if stored is None:
        label, ok = ("golden (to be written)", True) if update else ("golden", False)
        hint = "" if update else f"no {gpath}; create it with `mlasim check {path} --update-golden`"
        return [CheckRow(kind="golden", label=label, ok=ok, detail=hint)]
    return [
        CheckRow(
            kind="golden",
            label=d.metric,
            ok=d.ok,
            actual="-" if d.current is None else format_value(d.current),
            expected="-" if d.golden is None else format_value(d.golden),
            detail="" if d.ok else d.detail,
        )
        for d in golden.compare(summary, stored, policy)
    ]


def _tol_matches(key: str, metric: str) -> bool:
    return key == metric or metric.split(".", 1)[-1] == key


def check_paths(
    paths: Iterable[Path | str],
    *,
    jobs: int | None = None,
    update_golden: bool = False,
    runner: Runner,
) -> CheckReport:
    """Check every scenario under `paths`, `jobs` at a time (default: all cores).

    `runner(path, text)` turns one scenario file into its results JSON dict; with `jobs` > 1 it
    runs in worker processes, so it must be a module-level function (picklable).
    """
    files, skipped = discover(Path(p) for p in paths)
    workers = max(1, min(jobs or os.cpu_count() or 1, len(files) or 1))
    job = partial(run_one, runner=runner, update_golden=update_golden)
    if workers == 1:
        reports = [job(f) for f in files]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            reports = list(pool.map(job, files))
    updated: list[Path] = []
    if update_golden:
        for rep in reports:
            if rep.summary is not None and rep.ok:
                gpath = golden.golden_path(rep.path)
                golden.write_golden(gpath, rep.name, rep.summary)
                updated.append(gpath)
    return CheckReport(
        scenarios=tuple(reports),
        skipped=tuple(skipped),
        update_golden=update_golden,
        updated=tuple(updated),
    )
