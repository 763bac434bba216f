"""`mlasim run SCENARIO.yaml` and `mlasim schema`: simulate a study and show it side by side.

`register(app)` adds both commands to the `mlasim` Typer app.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from sim.cli_physics import check_output_paths, output_console
from sim.metrics.results import DeploymentResults, Results
from sim.metrics.stats import Percentiles
from sim.specs.deployment import Deployment, PdDeployment
from sim.specs.scenario import Scenario
from sim.specs.workload import ClosedWorkload, FixedLength


def _f(x: float | None, digits: int = 3, scale: float = 1.0) -> str:
    if x is None:
        return "-"
    v = x * scale
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.{digits}g}"


def _pct(p: Percentiles, scale: float = 1e3) -> str:
    """p50 / p90 / p99; a percentile beyond every observed value (requests still waiting at the
    end outnumber its tail) shows as '>' the largest one."""
    beyond = f">{_f(p.exceeds_s, 3, scale)}" if p.exceeds_s is not None else "-"
    return " / ".join(beyond if v is None else _f(v, 3, scale) for v in (p.p50, p.p90, p.p99))


def _with_ci(value: float, ci95: float | None) -> str:
    """A rate and its 95% interval's half-width as a share of it."""
    if ci95 is None or value <= 0:
        return _f(value)
    return f"{_f(value)} ±{100 * ci95 / value:.2g}%"


def _layout(d: Deployment | PdDeployment) -> str:
    def one(x: Deployment) -> str:
        moe = f"EP{x.ep}" + (f" x TP{x.moe_tp}" if x.moe_tp > 1 else "")
        rep = f" x{x.replicas}" if x.replicas > 1 else ""
        return f"attn TP{x.attn_tp} x DP{x.attn_dp}, MoE {moe}{rep}"

    if isinstance(d, PdDeployment):
        return f"P: {one(d.prefill)} | D: {one(d.decode)}"
    return one(d)


ROWS: list[tuple[str, Any]] = [
    ("GPUs (nodes)", lambda r: f"{r.gpus} ({r.nodes:g})"),
    ("KV dup factor", lambda r: _f(r.kv_dup_factor)),
    ("KV bytes / token / GPU", lambda r: _f(r.kv_bytes_per_token_per_gpu)),
    ("KV capacity tokens / GPU", lambda r: _f(r.kv_capacity_tokens_per_gpu)),
    ("KV capacity tokens / rank", lambda r: _f(r.kv_capacity_tokens_per_rank)),
    ("KV capacity tokens, all ranks", lambda r: _f(r.kv_capacity_tokens_total)),
    ("KV utilisation", lambda r: _f(r.kv_utilisation, 2)),
    ("decode batch / rank", lambda r: _f(r.decode_batch_per_rank)),
    ("step time ms", lambda r: _f(r.step_time_s, 3, 1e3)),
    ("DP-rank imbalance", lambda r: _f(r.dp_imbalance)),
    ("output tok/s / GPU", lambda r: _with_ci(r.output_tok_s_per_gpu, r.output_tok_s_per_gpu_ci95)),
    ("input tok/s / GPU", lambda r: _f(r.input_tok_s_per_gpu)),
    ("output tok/s (total)", lambda r: _f(r.output_tok_s)),
    ("TTFT ms p50/p90/p99", lambda r: _pct(r.ttft_s)),
    ("TPOT ms p50/p90/p99", lambda r: _pct(r.tpot_s)),
    ("ITL ms p50/p90/p99", lambda r: _pct(r.itl_s)),
    ("E2E s p50/p90/p99", lambda r: _pct(r.e2e_s, 1.0)),
    ("goodput req/s", lambda r: _f(r.goodput_req_s)),
    ("SLO met", lambda r: "yes" if r.slo_met else "no"),
    ("requests arr/done/run/queue/rej", lambda r: "/".join(
        str(getattr(r.requests, k)) for k in ("arrived", "completed", "running", "queued",
                                              "rejected"))),
    ("preemptions", lambda r: str(r.preemptions)),
    ("MTP accept length", lambda r: _f(r.mtp_accept_len)),
]  # fmt: skip


def results_table(scenario: Scenario, results: Results) -> Table:
    t = Table(title=f"{results.scenario}: {results.model} on {results.gpu}")
    t.add_column("metric")
    for d in results.deployments:
        t.add_column(d.name, justify="right")
    t.add_row("layout", *(_layout(scenario.deployment(d.name)) for d in results.deployments))
    for label, fn in ROWS:
        t.add_row(label, *(fn(d) for d in results.deployments))
    return t


# A mark, not the word, in each cell: most ops of a cross-GPU profile are extrapolated and the
# full word would wrap every cell of an 80-column terminal.
EXTRAPOLATED_MARK = "*"
EXTRAPOLATED_NOTE = (
    f"{EXTRAPOLATED_MARK} extrapolated: outside a measured grid, or from a table measured on "
    "another GPU; the time is that table's efficiency scaled by this GPU's roofline."
)


def breakdown_table(results: Results) -> Table:
    """Mean ms per step by op, with the source each time came from; an extrapolated time is
    marked (`extrapolated_note` says what the mark means)."""
    t = Table(title="step time by op, ms per step (source)")
    t.add_column("op")
    for d in results.deployments:
        t.add_column(d.name, justify="right")
    ops: list[str] = []
    for d in results.deployments:
        ops += [o for o in d.step_breakdown_s if o not in ops]

    def cell(d: DeploymentResults, op: str) -> str:
        if op not in d.step_breakdown_s:
            return "-"
        source = d.step_sources.get(op, "?")
        if op in d.extrapolated_ops:
            source += EXTRAPOLATED_MARK
        return f"{d.step_breakdown_s[op] * 1e3:.3f} ({source})"

    for op in ops:
        t.add_row(op, *(cell(d, op) for d in results.deployments))
    return t


LOCKSTEP_NOTE = (
    "users start together and their lengths are fixed, so they move in step (all prefilling, "
    "then all decoding): set workload.ramp_s or vary the lengths for a steady mix"
)


def lockstep_note(sc: Scenario) -> str | None:
    """A warning when a closed loop's users will move in step, None otherwise."""
    w = sc.workload
    if not isinstance(w, ClosedWorkload) or w.ramp_s > 0:
        return None
    fixed = isinstance(w.input, FixedLength) and isinstance(w.output, FixedLength)
    return LOCKSTEP_NOTE if fixed else None


NOISY_SHARE = 0.1  # a 95% interval wider than this share of the throughput gets a warning


def noisy_note(results: Results) -> str | None:
    """A warning naming the deployments whose throughput moves much across the window."""
    noisy = [
        f"{d.name} ±{100 * d.output_tok_s_per_gpu_ci95 / d.output_tok_s_per_gpu:.0f}%"
        for d in results.deployments
        if d.output_tok_s_per_gpu_ci95 is not None
        and d.output_tok_s_per_gpu > 0
        and d.output_tok_s_per_gpu_ci95 > NOISY_SHARE * d.output_tok_s_per_gpu
    ]
    if not noisy:
        return None
    return (
        f"throughput moves across the window ({', '.join(noisy)}: 95% interval from ten batch "
        "means): lengthen run.duration_s, or check whether the load moves in waves"
    )


def extrapolated_note(results: Results) -> str | None:
    """The footnote for `breakdown_table`'s mark, or None when no op was extrapolated."""
    return EXTRAPOLATED_NOTE if any(d.extrapolated_ops for d in results.deployments) else None


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
    from sim.io.requests_io import FORMATS as REQUEST_FORMATS
    from sim.io.requests_io import write_requests
    from sim.io.results_io import write_csv, write_json
    from sim.io.scenario_io import ScenarioError, load_scenario
    from sim.run import simulate_scenario, summarize_scenario
    from sim.search.overrides import OverrideError, apply_overrides, parse_assignment

    check_output_paths(json_out, csv_out, trace_out, requests_out)
    if requests_out is not None and requests_out.suffix not in REQUEST_FORMATS:
        console.print(
            f"[red]--requests {escape(str(requests_out))}: the file must end in "
            f"{' or '.join(REQUEST_FORMATS)}[/red]",
            highlight=False,
        )
        raise typer.Exit(2)
    try:
        sc = load_scenario(scenario)
    except ScenarioError as exc:  # names the file itself
        console.print(f"[red]{escape(str(exc))}[/red]", highlight=False)
        raise typer.Exit(2) from None
    try:
        sc = apply_overrides(sc, [parse_assignment(a) for a in set_ or []])
    except OverrideError as exc:
        console.print(f"[red]{escape(f'{scenario}: --set: {exc}')}[/red]", highlight=False)
        raise typer.Exit(2) from None
    try:
        with Progress(console=console, transient=True) as bar:
            tasks = {d.name: bar.add_task(d.name, total=1.0) for d in sc.deployments}
            outputs = simulate_scenario(
                sc, progress=lambda name, f: bar.update(tasks[name], completed=f)
            )
    except ValueError as exc:
        console.print(f"[red]{escape(f'{scenario}: {exc}')}[/red]", highlight=False)
        raise typer.Exit(2) from None
    results = summarize_scenario(sc, outputs)
    console.print(results_table(sc, results))
    console.print(breakdown_table(results))
    for note in (extrapolated_note(results), lockstep_note(sc), noisy_note(results)):
        if note is not None:  # the console's width, not the table's: one line on a wide terminal
            console.print(note, highlight=False)
    for path, writer in ((json_out, write_json), (csv_out, write_csv)):
        if path is not None:
            writer(results, path)
            console.print(f"wrote {path}")
    if trace_out is not None:
        from sim.io.trace import write_trace

        write_trace(outputs, trace_out)
        console.print(f"wrote {trace_out}")
    if requests_out is not None:
        try:
            write_requests(outputs, requests_out)
        except ValueError as exc:  # Parquet without pyarrow
            console.print(f"[red]{escape(str(exc))}[/red]", highlight=False)
            raise typer.Exit(2) from None
        console.print(f"wrote {requests_out}")


def schema() -> None:
    """Print the JSON Schema of scenario files."""
    typer.echo(json.dumps(Scenario.model_json_schema(), indent=2))


def register(app: typer.Typer) -> None:
    """Add `run` and `schema` to the `mlasim` app."""
    app.command(name="run")(run)
    app.command(name="schema")(schema)
