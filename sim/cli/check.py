"""The `mlasim check` command: a pass/fail table per scenario, then every failure in full.

Finding, running and checking the files is `sim.checks.runner`; this module gives it the runner
that validates and simulates a scenario file (`default_runner`) and prints the report.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from sim.checks.runner import CheckReport, CheckRow, ScenarioReport, check_paths
from sim.cli.common import output_console


def default_runner(path: Path, text: str) -> Mapping[str, Any]:
    """Validate and resolve the scenario (errors name file, line and field) and run it."""
    from sim.io.results_io import results_dict  # the simulator loads only when a check runs
    from sim.io.scenario_io import parse_resolved
    from sim.run import run_scenario
    from sim.specs.limits import wall_watch

    return results_dict(run_scenario(parse_resolved(text, path), progress=wall_watch()))


# Errors whose message is written for the reader (file:line: field: what is wrong, the fix);
# any other exception is a surprise, and its class is part of what went wrong (KeyError: 'x').
_MESSAGE_ERRORS = frozenset(
    {
        "CatalogError",
        "ClaimError",
        "ExpectError",
        "ProbeError",
        "ScenarioError",
        "TraceError",
        "ValidationError",
        "ValueError",
    }
)


def _error_message(row: CheckRow) -> str:
    """What an error row says: its message, after its class unless the message stands alone."""
    if not row.detail:
        return row.label
    return row.detail if row.label in _MESSAGE_ERRORS else f"{row.label}: {row.detail}"


def _counts(rep: ScenarioReport, kind: str) -> str:
    ok, total = rep.count(kind)
    return f"{ok}/{total}" if total else "-"


def _checks_table(rep: ScenarioReport, rows: list[CheckRow]) -> Table:
    title = f"{'PASS' if rep.ok else 'FAIL'} {rep.name} ({rep.path})"
    table = Table(title=title, show_lines=True, title_justify="left")
    table.add_column("kind")
    table.add_column("check", overflow="fold", ratio=3)
    table.add_column("current", justify="right")
    table.add_column("bound / golden", justify="right")
    table.add_column("why", overflow="fold", ratio=3)
    for row in rows:
        kind = Text(row.kind) if row.ok else Text.assemble(("x ", "red"), row.kind)
        table.add_row(kind, Text(row.label), row.actual, row.expected, Text(row.detail))
    return table


def render(report: CheckReport, console: Console, *, verbose: bool = False) -> None:
    """Print the summary table, the failures (both sides' values) and, if asked, every check."""
    summary = Table(title="mlasim check")
    summary.add_column("scenario")
    for col in ("expect", "golden", "wall s"):
        summary.add_column(col, justify="right")
    summary.add_column("result")
    for rep in report.scenarios:
        errors = rep.count("error")[1]
        verdict = "[green]PASS[/]" if rep.ok else ("[red]ERROR[/]" if errors else "[red]FAIL[/]")
        summary.add_row(
            Text(rep.name),
            _counts(rep, "expect"),
            _counts(rep, "golden"),
            f"{rep.wall_s:.1f}",
            verdict,
        )
    console.print(summary)

    for rep in report.scenarios:
        rows = [r for r in rep.rows if r.kind != "error" and (verbose or not r.ok)]
        if rows:
            console.print(_checks_table(rep, rows))
        for row in rep.rows:
            if row.kind == "error":  # multi-line messages (file:line: field: why) read best as text
                head, _, rest = _error_message(row).partition("\n")
                console.print(
                    Text.assemble(("ERROR ", "bold red"), f"{rep.name}: {head}"), soft_wrap=True
                )
                if rest:
                    console.print(Text(rest), soft_wrap=True)

    for path in report.skipped:
        console.print(f"skipped {path}: not a scenario (no deployments/model/workload key)")
    for path in report.updated:
        console.print(f"wrote {path}")
    if report.update_golden:
        for rep in report.scenarios:
            if not rep.ok:
                console.print(f"[yellow]golden of {rep.name} not written: its checks fail[/]")
    failed = sum(not r.ok for r in report.scenarios)
    total = len(report.scenarios)
    if not total:
        console.print("[red]no scenario files found[/]")
    elif failed:
        console.print(f"[red]{failed} of {total} scenarios failed[/]")
    else:
        console.print(f"[green]all {total} scenarios passed[/]")


def check_command(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Scenario files or folders (searched recursively).", show_default=False
        ),
    ] = None,
    update_golden: Annotated[
        bool,
        typer.Option(
            "--update-golden", help="Rewrite golden summaries of scenarios whose checks pass."
        ),
    ] = False,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", "-j", min=1, help="Scenarios run at once (default: all cores)."),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="List every check, not only failures.")
    ] = False,
) -> None:
    """Run scenario files, evaluate their `expect:` lines and compare golden summaries.

    Exits 1 if any scenario fails, so CI stops on a broken claim.
    """
    console = output_console()  # in CI logs wide enough that expressions stay on one line
    try:
        report = check_paths(
            paths or [Path("scenarios")],
            jobs=jobs,
            update_golden=update_golden,
            runner=default_runner,
        )
    except FileNotFoundError as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(2) from None
    render(report, console, verbose=verbose)
    if not report.ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the `check` command to the `mlasim` CLI."""
    app.command("check")(check_command)
