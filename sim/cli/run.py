"""`mlasim run SCENARIO.yaml` and `mlasim schema`: simulate a study and show it side by side.

`register(app)` adds both commands to the `mlasim` Typer app.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from sim.cli.common import check_output_paths, output_console
from sim.cli.format import num, pct, with_ci
from sim.cost.overheads import OVERLAP_ROWS, SHARED_EXPERTS_STREAM_ROW, TWO_BATCH_OVERLAP_ROW
from sim.cost.rate import LAUNCH_ROW
from sim.metrics.notes import EXTRAPOLATED_MARK, run_notes
from sim.metrics.results import DeploymentResults, Results, throughput_vs
from sim.specs.limits import wall_watch
from sim.specs.scenario import Scenario

if TYPE_CHECKING:
    from sim.engine import SimOutput


def _plain_progress() -> Any:
    """A progress callback writing `run: <deployment> 30%` to stderr at each new tenth."""
    seen: dict[str, int] = {}

    def tick(name: str, fraction: float) -> None:
        tenth = int(fraction * 10 + 1e-9)
        if tenth > seen.get(name, -1):
            seen[name] = tenth
            print(f"run: {name} {tenth * 10}%", file=sys.stderr, flush=True)

    return tick


ROWS: list[tuple[str, Any]] = [
    ("GPUs (nodes)", lambda r: f"{r.gpus} ({r.nodes:g})"),
    ("KV dup factor", lambda r: num(r.kv_dup_factor)),
    ("KV bytes / token / GPU", lambda r: num(r.kv_bytes_per_token_per_gpu)),
    ("KV capacity tokens / GPU", lambda r: num(r.kv_capacity_tokens_per_gpu)),
    ("KV capacity tokens / rank", lambda r: num(r.kv_capacity_tokens_per_rank)),
    ("KV capacity tokens, all ranks", lambda r: num(r.kv_capacity_tokens_total)),
    ("KV utilisation", lambda r: num(r.kv_utilisation, 2)),
    ("decode batch / rank", lambda r: num(r.decode_batch_per_rank)),
    ("step time ms", lambda r: num(r.step_time_s, 3, 1e3)),
    ("DP-rank imbalance", lambda r: num(r.dp_imbalance)),
    ("output tok/s / GPU", lambda r: with_ci(r.output_tok_s_per_gpu, r.output_tok_s_per_gpu_ci95)),
    ("input tok/s / GPU", lambda r: num(r.input_tok_s_per_gpu)),
    ("output tok/s / node", lambda r: num(r.output_tok_s_per_node)),
    ("output tok/s (total)", lambda r: num(r.output_tok_s)),
    ("TTFT ms p50/p90/p99", lambda r: pct(r.ttft_s)),
    ("TPOT ms p50/p90/p99", lambda r: pct(r.tpot_s)),
    ("ITL ms p50/p90/p99", lambda r: pct(r.itl_s)),
    ("E2E s p50/p90/p99", lambda r: pct(r.e2e_s, 1.0)),
    ("goodput req/s", lambda r: num(r.goodput_req_s)),
    ("SLO met", lambda r: "yes" if r.slo_met else "no"),
    ("requests arr/done/run/queue/rej", lambda r: "/".join(
        str(getattr(r.requests, k)) for k in ("arrived", "completed", "running", "queued",
                                              "rejected"))),
    ("preemptions", lambda r: str(r.preemptions)),
    ("MTP accept length", lambda r: num(r.mtp_accept_len)),
]  # fmt: skip


def results_table(scenario: Scenario, results: Results) -> Table:
    t = Table(title=f"{results.scenario}: {results.model} on {results.gpu}")
    t.add_column("metric")
    for d in results.deployments:
        t.add_column(d.name, justify="right")
    t.add_row("layout", *(scenario.deployment(d.name).layout for d in results.deployments))
    for label, fn in ROWS:
        t.add_row(label, *(fn(d) for d in results.deployments))
        if label == "output tok/s / GPU" and len(results.deployments) > 1:
            base = results.deployments[0]
            t.add_row(f"  vs {base.name} (paired)", *(vs(d, base) for d in results.deployments))
    return t


def vs(d: DeploymentResults, base: DeploymentResults) -> str:
    """Tokens per GPU as a multiple of `base`'s, with its 95% interval from the paired tenths
    of the window (both ran on the same workload and seed: see docs/reading-results.md)."""
    if d is base:
        return "1"
    paired = throughput_vs(d, base)
    if paired is None:
        ratio = (
            d.output_tok_s_per_gpu / base.output_tok_s_per_gpu
            if base.output_tok_s_per_gpu
            else None
        )
        return "-" if ratio is None else f"{ratio:.3g}x"
    return f"{paired[0]:.3g}x ±{paired[1]:.2g}"


def breakdown_table(results: Results) -> Table:
    """Mean ms per step by op, with the source each time came from; an extrapolated time is
    marked (`extrapolated_note` says what the mark means). Where work ran concurrently a row
    says what it hid (negative) or, split in two micro-batches, cost (positive), named by how
    (`overlap_row`: two-batch overlap, or an engine's shared experts on a second stream), and
    a last row the step it leaves."""
    t = Table(title="step time by op, ms per step (source)")
    t.add_column("op")
    for d in results.deployments:
        t.add_column(d.name, justify="right")
    ops: list[str] = []
    for d in results.deployments:
        ops += [o for o in d.step_breakdown_s if o not in ops]
    ops.sort(key=lambda o: o == LAUNCH_ROW)  # the launches last, below the ops they came from

    def cell(d: DeploymentResults, op: str) -> str:
        if op not in d.step_breakdown_s:
            return "-"
        source = d.step_sources.get(op, "?")
        if op in d.extrapolated_ops:
            source += EXTRAPOLATED_MARK
        return f"{d.step_breakdown_s[op] * 1e3:.3f} ({source})"

    for op in ops:
        t.add_row(op, *(cell(d, op) for d in results.deployments))
    for row in OVERLAP_ROWS:  # what concurrency hid, by how (the ops sum to step + saved)
        cells = [overlap_cell(d, row) for d in results.deployments]
        if any(c != "-" for c in cells):
            t.add_row(row, *cells)
    if any(d.overlap_saved_s for d in results.deployments):
        t.add_row("step", *(step_cell(d) for d in results.deployments))
    return t


# a short source for the overlap rows' cells (the results' overlap_source has the long one)
OVERLAP_CELL_SOURCE = {TWO_BATCH_OVERLAP_ROW: "overlap", SHARED_EXPERTS_STREAM_ROW: "2nd stream"}


def overlap_cell(d: DeploymentResults, row: str) -> str:
    """`d`'s cell in overlap row `row`: minus what it hid, or "-" where it hid nothing so."""
    if not d.overlap_saved_s or overlap_of(d) != row:
        return "-"
    return f"{-d.overlap_saved_s * 1e3:+.3f} ({OVERLAP_CELL_SOURCE[row]})"


def overlap_of(d: DeploymentResults) -> str:
    """The breakdown row of `d`'s overlap_saved_s (results written before the row was recorded
    held two-batch overlap's alone)."""
    return d.overlap_row or TWO_BATCH_OVERLAP_ROW


def step_cell(d: DeploymentResults) -> str:
    return "-" if d.step_time_s is None else f"{d.step_time_s * 1e3:.3f}"


def run(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML file.")],
    json_out: Annotated[Path | None, typer.Option("--json", help="Write results JSON.")] = None,
    csv_out: Annotated[Path | None, typer.Option("--csv", help="Write results CSV.")] = None,
    trace_out: Annotated[
        Path | None, typer.Option("--trace", help="Write a Chrome/Perfetto trace of steps.")
    ] = None,
    requests_out: Annotated[
        Path | None,
        typer.Option(
            "--requests",
            help="Write one row per request (arrival, lengths, status, TTFT, TPOT, ...) as .csv "
            "or .parquet.",
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Override a field: PATH=VALUE, e.g. workload.rate_req_s=20 or "
            "deployments.dp8_ep8.mtp_draft_tokens=1 (repeatable; see docs/search.md).",
        ),
    ] = None,
) -> None:
    """Simulate every deployment of a scenario and print them side by side."""
    console = output_console()
    from sim.io.overrides import OverrideError, apply_overrides, parse_assignment
    from sim.io.requests_io import write_requests
    from sim.io.resolve import resolve
    from sim.io.results_io import write_csv, write_json
    from sim.io.scenario_io import ScenarioError, load_resolved
    from sim.run import run_scenario

    check_output_paths(json_out, csv_out, trace_out, requests_out)
    if requests_out is not None and (problem := requests_problem(requests_out)):
        console.print(
            f"[red]--requests {escape(str(requests_out))}: {problem}[/red]", highlight=False
        )
        raise typer.Exit(2)
    try:
        resolved = load_resolved(scenario)
    except ScenarioError as exc:  # names the file itself
        console.print(f"[red]{escape(str(exc))}[/red]", highlight=False)
        raise typer.Exit(2) from None
    try:
        if set_:
            sc = apply_overrides(resolved.scenario, [parse_assignment(a) for a in set_])
            resolved = resolve(sc, read_trace=False)
    except OverrideError as exc:
        hint = ""
        if any("," in a.partition("=")[2] for a in set_ or []):
            hint = " (to run several values, use `mlasim sweep` with the same --set)"
        console.print(f"[red]{escape(f'{scenario}: --set: {exc}{hint}')}[/red]", highlight=False)
        raise typer.Exit(2) from None
    sc = resolved.scenario
    outputs: list[SimOutput] = []  # each deployment's engine output, for the exports
    try:
        if console.is_terminal:
            with Progress(console=console, transient=True) as bar:
                tasks = {d.name: bar.add_task(d.name, total=1.0) for d in sc.deployments}
                results = run_scenario(
                    resolved,
                    progress=wall_watch(lambda name, f: bar.update(tasks[name], completed=f)),
                    on_output=outputs.append,
                )
        else:  # a pipe or a log: plain lines on stderr, one per tenth of each deployment's run
            progress = wall_watch(_plain_progress())
            results = run_scenario(resolved, progress=progress, on_output=outputs.append)
    except ValueError as exc:
        console.print(f"[red]{escape(f'{scenario}: {exc}')}[/red]", highlight=False)
        raise typer.Exit(2) from None
    # files first: a reader that stops early (`| head`) must not cost them
    written = []
    for path, writer in ((json_out, write_json), (csv_out, write_csv)):
        if path is not None:
            writer(results, path)
            written.append(path)
    if trace_out is not None:
        from sim.io.trace import write_trace

        write_trace(outputs, trace_out)
        written.append(trace_out)
    if requests_out is not None:
        write_requests(outputs, requests_out)
        written.append(requests_out)
    console.print(results_table(sc, results))
    console.print(breakdown_table(results))
    for note in run_notes(sc, results, resolved.profile, resolved.model):
        console.print(note, highlight=False)  # the console's width: one line on a wide terminal
    for path in written:
        console.print(f"wrote {path}")


def requests_problem(path: Path) -> str | None:
    """What stops `--requests` writing `path`, found before the simulation runs."""
    from sim.io.requests_io import FORMATS

    if path.suffix not in FORMATS:
        return f"the file must end in {' or '.join(FORMATS)}"
    if path.suffix == ".parquet" and importlib.util.find_spec("pyarrow") is None:
        return "writing Parquet needs pyarrow (pip install pyarrow); or write a .csv"
    return None


def schema() -> None:
    """Print the JSON Schema of scenario files."""
    typer.echo(json.dumps(Scenario.model_json_schema(), indent=2))


def register(app: typer.Typer) -> None:
    """Add `run` and `schema` to the `mlasim` app."""
    app.command(name="run")(run)
    app.command(name="schema")(schema)
