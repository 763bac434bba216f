"""`mlasim plan`: search layouts for a model, GPU types, traffic and SLO; print the cheapest
that meet it, their cost and launch commands; write the Pareto page.

`register(app)` adds the command to the `mlasim` Typer app.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from sim.cli.common import error_console, output_console, usage_error
from sim.cli.search import BackendOpt, JobsOpt, RayOpt, _backend
from sim.specs.base import error_lines

Opt = typer.Option


def _lengths(tokens: int | None, which: str) -> dict[str, Any] | None:
    return None if tokens is None else {"kind": "fixed", "tokens": tokens}


def request_data(scenario: Path | None, cli: dict[str, Any]) -> dict[str, Any]:
    """PlanRequest data: a plan file's `plan:` block (model, gpu, workload lengths and slo of
    the file fill what it leaves out), then the command line's options over it."""
    data: dict[str, Any] = {}
    if scenario is not None:
        try:
            doc = yaml.safe_load(scenario.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise usage_error(f"{scenario}: {exc}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("plan"), dict):
            raise usage_error(f"{scenario}: no `plan:` block (a mapping of plan options)")
        w = doc.get("workload") or {}
        inherited = {
            "model": doc.get("model"), "gpus": [doc["gpu"]] if doc.get("gpu") else None,
            "input": w.get("input"), "output": w.get("output"), "slo": doc.get("slo"),
            "prefix_cache_fraction": w.get("prefix_cache_fraction"),
        }  # fmt: skip
        data = {k: v for k, v in inherited.items() if v is not None} | doc["plan"]
    slo = dict(data.get("slo") or {})
    for key in ("ttft_s", "tpot_s", "percentile"):
        if cli.get(key) is not None:
            slo[key] = cli[key]
    if slo:
        data["slo"] = slo
    for key in ("model", "gpus", "input", "output", "rate_req_s", "users", "max_gpus",
                "engine", "gpu_hour_usd", "top"):  # fmt: skip
        if cli.get(key) is not None:
            data[key] = cli[key]
    return data


def _progress(console: Console) -> Any:
    """A progress callback: a bar on a terminal, else a plain line to stderr every ~10%."""
    if console.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        bar = Progress(BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                       transient=True)  # fmt: skip
        task = bar.add_task("plan", total=None)
        bar.start()

        def tick(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)
            if done == total:
                bar.stop()

        return tick
    last = [-1]

    def line(done: int, total: int) -> None:
        step = max(total // 10, 1)
        if done == total or done // step != last[0]:
            last[0] = done // step
            print(f"plan: {done}/{total} candidates simulated", file=sys.stderr, flush=True)

    return line


def plan(
    model: Annotated[
        str | None, Opt("--model", help="Catalog model, config.json or HF folder.")
    ] = None,
    gpu: Annotated[list[str] | None, Opt("--gpu", help="GPU type (repeatable).")] = None,
    isl: Annotated[int | None, Opt("--isl", help="Prompt tokens.")] = None,
    osl: Annotated[int | None, Opt("--osl", help="Answer tokens.")] = None,
    ttft_s: Annotated[float | None, Opt("--ttft-s", help="TTFT target, s.")] = None,
    tpot_s: Annotated[float | None, Opt("--tpot-s", help="TPOT target, s.")] = None,
    percentile: Annotated[float | None, Opt("--percentile", help="SLO percentile.")] = None,
    rate: Annotated[float | None, Opt("--rate", help="Target arrival rate, req/s.")] = None,
    users: Annotated[int | None, Opt("--users", help="Target concurrent users.")] = None,
    max_gpus: Annotated[int | None, Opt("--max-gpus", help="Most GPUs in a plan.")] = None,
    engine: Annotated[str | None, Opt("--engine", help="sglang, vllm or trtllm.")] = None,
    gpu_hour_usd: Annotated[float | None, Opt("--gpu-hour-usd", help="$ per GPU-hour.")] = None,
    top: Annotated[int | None, Opt("--top", help="Rows in the top-K table.")] = None,
    scenario: Annotated[Path | None, Opt("--scenario", help="YAML with a plan: block.")] = None,
    out: Annotated[Path, Opt("--out", help="Folder for plan.json, pareto.html, journal.")] = Path(
        "plan-out"
    ),
    json_out: Annotated[bool, Opt("--json", help="Print the plan as JSON.")] = False,
    backend: BackendOpt = "process",
    jobs: JobsOpt = None,
    ray_address: RayOpt = None,
) -> None:
    """Search deployments (layout, MTP, KV dtype, PD or not, replicas) for a target load.

    Prunes what cannot fit or meet the SLO, simulates the rest, ranks what meets it by cost.

    Finished candidates go to OUT/journal.jsonl: a rerun with the same options skips them.
    """
    from sim.io.journal import Journal, JournalError
    from sim.plan.planner import make_plan
    from sim.plan.report import PNG_NOTE, columns, top_rows, write_outputs
    from sim.plan.spec import PlanRequest

    console = output_console()
    cli = {"model": model, "gpus": gpu, "input": _lengths(isl, "input"),
           "output": _lengths(osl, "output"), "ttft_s": ttft_s, "tpot_s": tpot_s,
           "percentile": percentile, "rate_req_s": rate, "users": users, "max_gpus": max_gpus,
           "engine": engine, "gpu_hour_usd": gpu_hour_usd, "top": top}  # fmt: skip
    data = request_data(scenario, cli)
    needed = (("--model", "model"), ("--gpu", "gpus"), ("--isl", "input"), ("--osl", "output"),
              ("--ttft-s/--tpot-s", "slo"))  # fmt: skip
    missing = [f for f, k in needed if k not in data]
    if missing:
        raise usage_error(f"give {', '.join(missing)} (or a --scenario file with a plan: block)")
    try:
        req = PlanRequest.model_validate(data)
    except ValidationError as exc:
        raise usage_error("; ".join(error_lines(exc))) from None
    try:
        journal = Journal(out / "journal.jsonl")
    except JournalError as exc:
        raise usage_error(str(exc)) from None
    runner = _backend(backend, jobs, ray_address)
    err = error_console()
    with runner:
        try:
            result = make_plan(req, runner, journal, _progress(err))
        except ValueError as exc:
            raise usage_error(str(exc)) from None
    paths = write_outputs(result, out)
    if json_out:
        print(json.dumps(result.to_json(), indent=1))
        return
    _print(console, result, columns(result), top_rows(result))
    for p in paths:
        console.print(f"wrote {p}", highlight=False)
    console.print(PNG_NOTE, highlight=False)


def _print(console: Console, result: Any, cols: list[str], rows: list[list[str]]) -> None:
    req = result.request
    target = f"{req.rate_req_s:g} req/s" if req.rate_req_s else f"{req.users} users"
    removed = ", ".join(f"{k} {v}" for k, v in result.removed.items())
    console.print(
        f"searched {result.space_size} candidates: pruned {removed}; simulated "
        f"{result.simulated} in {result.wall_s:.0f} s", highlight=False,
    )  # fmt: skip
    t = Table(title=f"top {len(rows)} for {req.model}, {target}, p{req.slo.percentile:g} TTFT "
                    f"<= {req.slo.ttft_s:g} s, TPOT <= {req.slo.tpot_s * 1e3:g} ms")  # fmt: skip
    for c in cols:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*r)
    console.print(t)
    console.print(f"verdict: {result.verdict}", highlight=False)
    _print_misses(console, result)
    if result.best:
        b = result.best
        console.print(f"GPUs for {target}: {b['gpus']} {b['gpu']} ({b['layout']} x"
                      f"{b['replicas']})", highlight=False)  # fmt: skip
    for i, r in enumerate(result.top, start=1):
        for eng, cmds in r["launch"].items():
            console.print(f"\n#{i} {eng}:", highlight=False)
            for c in cmds:
                console.print(c, highlight=False, soft_wrap=True, markup=False)


SHOWN_MISSES = 5


def _print_misses(console: Console, result: Any) -> None:
    """Candidates that missed the SLO or memory narrowly, and where every removed one is."""
    near = [r for r in result.rows if r.get("near_miss")]
    near += [r for r in result.pruned if str(r.get("reason", "")).startswith("near miss")]
    for r in near[:SHOWN_MISSES]:
        copies = f" x{r['replicas']}" if "replicas" in r else ""
        console.print(f"{r['gpu']} {r['layout']}{copies}: {r['reason']}", highlight=False)
    if len(near) > SHOWN_MISSES:
        console.print(f"... and {len(near) - SHOWN_MISSES} more near misses", highlight=False)
    failed = sum(r.get("status") == "failed" for r in result.rows)
    console.print(
        f"{len(result.pruned)} layouts or candidates removed and {failed} failed runs are listed "
        "with their reasons in plan.json (pruned, rows)", highlight=False,
    )  # fmt: skip


def register(app: typer.Typer) -> None:
    app.command(name="plan")(plan)
