"""`mlasim sweep` and `mlasim capacity`: grids of scenarios and the rate each deployment sustains.

`register(app)` adds both commands to the `mlasim` Typer app.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from sim.cli.common import check_output_paths, output_console, usage_error
from sim.cli.format import beyond, num, with_ci
from sim.io.overrides import OverrideError
from sim.search.backends import BACKENDS, Backend, BackendError, make_backend
from sim.search.capacity_report import CapacityReport
from sim.specs.scenario import Scenario

if TYPE_CHECKING:
    from sim.io.journal import Journal

SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="PATH=VALUE override (repeatable), e.g. workload.rate_req_s=40, "
        "deployments.dp_ep.mtp_draft_tokens=1, deployments.*.kv_dtype=fp8, run.duration_s=60.",
    ),
]
BackendOpt = Annotated[
    str, typer.Option("--backend", help=f"Where runs execute: {', '.join(BACKENDS)}.")
]
JobsOpt = Annotated[
    int | None, typer.Option("--jobs", help="Worker processes (process backend; default: CPUs).")
]
RayOpt = Annotated[
    str | None,
    typer.Option("--ray-address", help="Ray cluster address (default: $RAY_ADDRESS, else local)."),
]


def _load(path: Path) -> Scenario:
    from sim.io.scenario_io import ScenarioError, load_scenario

    try:
        return load_scenario(path)
    except ScenarioError as exc:
        raise usage_error(str(exc)) from None


def _journal(journal: Path | None, command: str, scenario_name: str) -> Journal:
    """The run's journal: `--journal`, else .mlasim/<command>-<scenario name>.jsonl (the name
    made safe for a file name)."""
    from sim.io.journal import Journal, JournalError

    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in scenario_name)[:100]
    try:
        return Journal(journal or Path(".mlasim") / f"{command}-{safe}.jsonl")
    except (JournalError, OSError) as exc:
        raise usage_error(f"--journal: {exc}") from None


def _backend(name: str, jobs: int | None, ray_address: str | None) -> Backend:
    try:
        return make_backend(name, jobs=jobs, ray_address=ray_address)
    except BackendError as exc:
        raise usage_error(f"--backend {name}: {exc}") from None


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


@contextmanager
def _run_errors(scenario: Path) -> Iterator[None]:
    """A run that fails on its inputs (a deployment that does not fit) exits 2, as `run` does."""
    try:
        yield
    except (ValueError, OverrideError) as exc:
        raise usage_error(f"{scenario}: {exc}") from None


def _cell(v: Any) -> str:
    return json.dumps(v) if isinstance(v, list | dict) else str(v)


def sweep(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML file.")],
    set_: SetOpt = None,
    backend: BackendOpt = "process",
    jobs: JobsOpt = None,
    ray_address: RayOpt = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write rows as JSON.")] = None,
    csv_out: Annotated[Path | None, typer.Option("--csv", help="Write rows as CSV.")] = None,
    journal: Annotated[
        Path | None,
        typer.Option(
            "--journal",
            help="Append-only record of finished points (default: .mlasim/sweep-<name>.jsonl); "
            "run again with the same arguments after an interruption to skip them.",
        ),
    ] = None,
) -> None:
    """Run a grid of scenario variants: every combination of the --set values.

    Each finished point is recorded as it completes (--journal), so a sweep stopped by Ctrl-C
    or a kill resumes where it stopped; a point that fails is a row with its error.

    Each --set PATH=V1,V2,... (or PATH=[V1, V2]) is an axis; the grid is their product.

    At most 1000 points; output has one row per point x deployment.
    """
    from sim.search.grid import grid_points, parse_axis
    from sim.search.sweep import run_grid_journaled, sweep_rows, write_rows_csv, write_rows_json

    console = output_console()
    check_output_paths(json_out, csv_out)
    base = _load(scenario)
    try:
        axes = [parse_axis(s) for s in set_ or []]
        points = grid_points(base, axes)
    except OverrideError as exc:
        raise usage_error(f"{scenario}: --set: {exc}") from None
    record = _journal(journal, "sweep", base.name)
    runner = _backend(backend, jobs, ray_address)
    with runner, _run_errors(scenario), _progress(console) as bar:
        task = bar.add_task(f"sweep ({runner.name})", total=len(points))
        results = run_grid_journaled(
            points, runner, record, lambda done, n: bar.update(task, completed=done)
        )
    rows = sweep_rows(points, results)
    varying = [a.path for a in axes if len(a.values) > 1]
    t = Table(title=f"sweep of {base.name}: {len(points)} points x {len(base.deployments)} deps")
    t.add_column("#", justify="right")
    for col in (*varying, "deployment"):
        t.add_column(col, overflow="fold")
    for col in ("tok/s/GPU", "TTFT p90 ms", "TPOT p90 ms", "goodput req/s", "SLO met"):
        t.add_column(col, justify="right")
    for r in rows:
        if "error" in r:
            t.add_row(str(r["point"]), *(_cell(r[p]) for p in varying), "-", f"error: {r['error']}")
            continue
        t.add_row(
            str(r["point"]),
            *(_cell(r[p]) for p in varying),
            r["deployment"],
            with_ci(r["output_tok_s_per_gpu"], r.get("output_tok_s_per_gpu_ci95")),
            beyond(r["ttft_s.p90"], r.get("ttft_s.exceeds_s"), 1e3),
            num(r["tpot_s.p90"], 3, 1e3),
            num(r["goodput_req_s"]),
            "yes" if r["slo_met"] else "no",
        )
    console.print(t)
    for path, writer in ((json_out, write_rows_json), (csv_out, write_rows_csv)):
        if path is not None:
            writer(rows, path)
            console.print(f"wrote {path}")
    failed = [r for r in rows if "error" in r]
    if failed and len(failed) == len(points):  # nothing ran: the inputs are wrong, as in `run`
        raise usage_error(f"{scenario}: {failed[0]['error']}")
    for r in failed:
        console.print(f"point {r['point']} failed: {r['error']}", highlight=False)


def capacity(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML file (poisson or gamma).")],
    target_rate: Annotated[
        float, typer.Option("--target-rate", help="Arrival rate to provision for, req/s.")
    ],
    tolerance: Annotated[
        float, typer.Option("--tolerance", help="Relative precision of the maximum rate.")
    ] = 0.05,
    max_runs: Annotated[
        int, typer.Option("--max-runs", help="Most simulations per deployment.")
    ] = 20,
    probes_per_round: Annotated[
        int, typer.Option("--probes-per-round", help="Rates probed at once per deployment.")
    ] = 1,
    set_: SetOpt = None,
    backend: BackendOpt = "process",
    jobs: JobsOpt = None,
    ray_address: RayOpt = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report JSON.")] = None,
    pd_pools: Annotated[
        bool,
        typer.Option(
            "--pd-pools/--no-pd-pools",
            help="Also size each PD deployment's prefill and decode pools separately.",
        ),
    ] = True,
    journal: Annotated[
        Path | None,
        typer.Option(
            "--journal",
            help="Append-only record of finished probes (default: "
            ".mlasim/capacity-<name>.jsonl); run again after an interruption to skip them.",
        ),
    ] = None,
) -> None:
    """Highest arrival rate each deployment serves within the SLO; GPUs for --target-rate.

    Doubles or halves workload.rate_req_s until the SLO is bracketed, then bisects it.

    Each probe simulates one deployment (or one PD pool alone) for the scenario's run.duration_s,
    and is recorded as it completes (--journal), so a stopped search resumes where it stopped.
    """
    from sim.io.journal import write_atomic
    from sim.io.overrides import apply_overrides, parse_assignment
    from sim.search.capacity import CapacityError, capacity_search, check_options, search_count

    console = output_console()
    check_output_paths(json_out)
    try:
        sc = apply_overrides(_load(scenario), [parse_assignment(s) for s in set_ or []])
        check_options(sc, target_rate, tolerance, max_runs, probes_per_round)
    except (OverrideError, CapacityError) as exc:
        raise usage_error(f"{scenario}: {exc}") from None
    record = _journal(journal, "capacity", sc.name)
    runner = _backend(backend, jobs, ray_address)
    with runner, _run_errors(scenario), _progress(console) as bar:
        total = max_runs * search_count(sc, pd_pools)
        task = bar.add_task(f"capacity ({runner.name})", total=total)

        def on_probe(name: str, rate: float, ok: bool) -> None:
            verdict = "meets" if ok else "misses"
            bar.update(task, advance=1, description=f"{name} {verdict} at {rate:.4g} req/s")

        report = capacity_search(
            sc, target_rate, runner, tolerance=tolerance, max_runs=max_runs,
            probes_per_round=probes_per_round, on_probe=on_probe, pd_pools=pd_pools,
            journal=record,
        )  # fmt: skip
    failed = [d for d in report.deployments if d.status == "error"]
    if failed and len(failed) == len(report.deployments):  # nothing ran: as in `run`
        raise usage_error(f"{scenario}: {failed[0].note.split(': ', 1)[1]}")
    pct = f"p{sc.slo.percentile:g}"
    t = Table(
        title=f"{sc.name}: highest rate meeting the SLO ({pct} TTFT <= {sc.slo.ttft_s:g} s, "
        f"TPOT <= {sc.slo.tpot_s * 1e3:g} ms); replicas and GPUs for {target_rate:g} req/s"
    )
    t.add_column("deployment", no_wrap=True)
    for col in ("max req/s", "tok/s/GPU", f"TTFT {pct} ms", f"TPOT {pct} ms", "replicas", "GPUs",
                "runs"):  # fmt: skip
        t.add_column(col, justify="right")
    t.add_column("status", no_wrap=True)
    for d in report.deployments:
        t.add_row(
            d.deployment,
            num(d.max_rate_req_s, 4),
            num(d.output_tok_s_per_gpu),
            num(d.ttft_s, 3, 1e3),
            num(d.tpot_s, 3, 1e3),
            "-" if d.replicas is None else str(d.replicas),
            "-" if d.gpus is None else str(d.gpus),
            str(d.runs),
            d.status,
        )
    console.print(t)
    for d in report.deployments:
        console.print(f"{d.deployment}: {d.note}", highlight=False)
        for w in d.warnings:
            console.print(f"{d.deployment}: warning: {w}", highlight=False)
    if report.pd_pools:
        _print_pd_pools(console, report)
    if json_out is not None:
        write_atomic(json_out, json.dumps(report.model_dump(mode="json"), indent=2) + "\n")
        console.print(f"wrote {json_out}")


def _print_pd_pools(console: Console, report: CapacityReport) -> None:
    """The PD pools sized separately: a table, the prefill : decode GPU line and each pool's
    note."""
    slo, target = report.slo, report.target_rate_req_s
    pct = f"p{slo.percentile:g}"
    t = Table(
        title=f"PD pools sized separately for {target:g} req/s: prefill alone within {pct} TTFT "
        f"<= the SLO's less the KV transfer, decode alone within {pct} TPOT <= "
        f"{slo.tpot_s * 1e3:g} ms"
    )
    t.add_column("deployment", no_wrap=True)
    t.add_column("pool", no_wrap=True)
    for col in ("max req/s", f"TTFT {pct} ms", f"TPOT {pct} ms", "units", "GPUs each unit",
                "GPUs", "runs"):  # fmt: skip
        t.add_column(col, justify="right")
    t.add_column("status", no_wrap=True)
    for pd in report.pd_pools:
        for pool, r in (("prefill", pd.prefill), ("decode", pd.decode)):
            t.add_row(
                pd.deployment, pool, num(r.max_rate_req_s, 4),
                num(r.ttft_s, 3, 1e3) if pool == "prefill" else "-",
                num(r.tpot_s, 3, 1e3) if pool == "decode" else "-",
                "-" if r.replicas is None else str(r.replicas), str(r.gpus_per_deployment),
                "-" if r.gpus is None else str(r.gpus), str(r.runs), r.status,
            )  # fmt: skip
    console.print(t)
    pairs = {d.deployment: d for d in report.deployments}
    for pd in report.pd_pools:
        a, b = pd.prefill.gpus, pd.decode.gpus
        whole = pairs[pd.deployment].gpus
        console.print(
            f"{pd.deployment}: prefill : decode GPUs = {'-' if a is None else a} : "
            f"{'-' if b is None else b}; {'-' if pd.gpus is None else pd.gpus} GPUs in all "
            f"(whole pairs: {'-' if whole is None else whole}); prefill TTFT budget "
            f"{pd.prefill_ttft_budget_s:.4g} s = {slo.ttft_s:g} s less "
            f"{pd.kv_transfer_s * 1e3:.3g} ms KV transfer",
            highlight=False,
        )
        for r in (pd.prefill, pd.decode):
            console.print(f"{r.deployment}: {r.note}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add `sweep` and `capacity` to the `mlasim` app."""
    app.command(name="sweep")(sweep)
    app.command(name="capacity")(capacity)
