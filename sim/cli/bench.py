"""`mlasim compare-bench RESULT --scenario S.yaml`: a measured benchmark beside the simulated one.

RESULT is a file a serving-benchmark client wrote (`sim.io.bench_results`); the scenario's
workload must be the same benchmark (`kind: benchmark`). `register(app)` adds the command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from sim.cli.common import output_console
from sim.metrics.benchmark import BenchmarkResults

# (label, measured field, simulated figure)
ROWS = (
    ("completed requests", "completed", lambda b: float(b.completed)),
    ("duration s", "duration", lambda b: b.duration_s),
    ("output throughput tok/s", "output_throughput", lambda b: b.output_throughput_tok_s),
    ("TTFT ms mean", "mean_ttft_ms", lambda b: b.ttft.mean_ms),
    ("TTFT ms median", "median_ttft_ms", lambda b: b.ttft.median_ms),
    ("TTFT ms p99", "p99_ttft_ms", lambda b: b.ttft.p99_ms),
    ("TPOT ms mean", "mean_tpot_ms", lambda b: b.tpot.mean_ms),
    ("TPOT ms median", "median_tpot_ms", lambda b: b.tpot.median_ms),
    ("ITL ms mean", "mean_itl_ms", lambda b: b.itl.mean_ms),
    ("E2E ms mean", "mean_e2e_ms", lambda b: b.e2e.mean_ms),
)


def comparison_table(
    tool: str, measured: dict[str, float], sims: dict[str, BenchmarkResults]
) -> Table:
    t = Table(title=f"measured ({tool}) beside simulated")
    t.add_column("metric")
    t.add_column("measured", justify="right")
    for name in sims:
        t.add_column(name, justify="right")
        t.add_column("sim / meas", justify="right")
    for label, field, fn in ROWS:
        if field not in measured:
            continue
        m = measured[field]
        cells = [label, f"{m:,.4g}"]
        for b in sims.values():
            s = fn(b)
            cells += ["-", "-"] if s is None else [f"{s:,.4g}", f"{s / m:.2f}x" if m else "-"]
        t.add_row(*cells)
    return t


def compare_bench(
    result: Annotated[Path, typer.Argument(help="bench_serving .jsonl or vllm bench .json.")],
    scenario: Annotated[
        Path, typer.Option("--scenario", help="Scenario YAML with a benchmark workload.")
    ],
) -> None:
    """Print a measured serving benchmark beside the same benchmark simulated."""
    from sim.io.bench_results import BenchResultError, read_bench_result
    from sim.io.scenario_io import ScenarioError, load_resolved
    from sim.run import run_scenario
    from sim.specs.workload import BenchmarkWorkload

    console = output_console()

    def fail(msg: str) -> typer.Exit:
        console.print(f"[red]{escape(msg)}[/red]", highlight=False)
        return typer.Exit(2)

    try:
        measured = read_bench_result(result)
        resolved = load_resolved(scenario)
        sc = resolved.scenario
    except (BenchResultError, ScenarioError) as exc:
        raise fail(str(exc)) from None
    w = sc.workload
    if not isinstance(w, BenchmarkWorkload):
        raise fail(
            f"{scenario}: workload.kind is {w.kind!r}; compare-bench needs kind: benchmark "
            "(num_prompts, max_concurrency, request_rate as the measured run used)"
        )
    for field, theirs, ours in (
        ("num_prompts", measured.num_prompts, w.num_prompts),
        ("max_concurrency", measured.max_concurrency, w.max_concurrency),
    ):
        if theirs is not None and theirs != ours:
            console.print(
                f"[yellow]note: the result has {field} {theirs}, the scenario {ours}: not the "
                "same benchmark[/yellow]",
                highlight=False,
            )
    try:
        results = run_scenario(resolved)
    except ValueError as exc:
        raise fail(f"{scenario}: {exc}") from None
    sims = {d.name: d.benchmark for d in results.deployments if d.benchmark is not None}
    console.print(comparison_table(measured.tool, measured.figures, sims))


def register(app: typer.Typer) -> None:
    """Add `compare-bench` to the `mlasim` app."""
    app.command(name="compare-bench")(compare_bench)
