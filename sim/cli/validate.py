"""`mlasim validate`: simulate measured deployments and report how far the predictions are.

Resumable: results go to `<out>/results.jsonl` row by row; the same command on the same `--out`
skips the rows already there. Progress goes to stderr, a line every few rows when stderr is not
a terminal.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from sim.cli.common import usage_error
from sim.search.backends import BACKENDS, BackendError, make_backend
from sim.validate.rows import RowsError
from sim.validate.runner import ProgressFn
from sim.validate.workload import AIPERF_COUNTS, REQUEST_PATHS, BenchCounts

PUBLISHED = "published"


def _progress(every: int) -> ProgressFn:
    """A line to stderr every `every` rows (every row on a terminal), with the time so far."""
    start = time.perf_counter()

    def tick(done: int, total: int, rid: str) -> None:
        if done % every == 0 or done == total or sys.stderr.isatty():
            el = time.perf_counter() - start
            print(f"validate: {done}/{total} rows, {el:.0f} s ({rid})", file=sys.stderr)

    return tick


def validate(
    dataset: Annotated[
        str,
        typer.Option(help="'aic' (aiconfigurator-core's measured rows), 'published', or a CSV."),
    ] = "aic",
    model: Annotated[str | None, typer.Option(help="Keep model paths containing this.")] = None,
    gpu: Annotated[str | None, typer.Option(help="Keep these GPUs: 'h200', 'h100,h200'.")] = None,
    engine: Annotated[str | None, typer.Option(help="sglang, trtllm or vllm.")] = None,
    mode: Annotated[str | None, typer.Option(help="agg or disagg.")] = None,
    ids: Annotated[Path | None, typer.Option(help="Keep the row ids listed in this file.")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Keep the first N rows.")] = None,
    jobs: Annotated[int | None, typer.Option(help="Worker processes (process backend).")] = None,
    backend: Annotated[str, typer.Option(help=f"One of {', '.join(BACKENDS)}.")] = "process",
    out: Annotated[Path, typer.Option(help="Folder for results.jsonl and the report.")] = Path(
        "validation-out"
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    every: Annotated[int, typer.Option(min=1, help="Progress line every N rows.")] = 10,
    docs: Annotated[
        Path | None,
        typer.Option(help="Also rewrite this Markdown file's generated baseline block."),
    ] = None,
    warmup_per_user: Annotated[
        int,
        typer.Option(
            min=0,
            help="Warm-up requests per user (the clients ran 2; it changes no simulated figure).",
        ),
    ] = AIPERF_COUNTS.warmup_per_user,
    requests_per_user: Annotated[
        int,
        typer.Option(
            min=1,
            help="Measured requests per user, answers of every length "
            "(aiconfigurator's runner: 10).",
        ),
    ] = AIPERF_COUNTS.measured_per_user,
    request_path: Annotated[
        str,
        typer.Option(
            help="What lies between a send and the engine: none, or engine (the row engine's "
            "measured serving path: SGLang 6.91 ms; docs/serving-overheads.md, (g)).",
        ),
    ] = AIPERF_COUNTS.request_path,
) -> None:
    """Simulate measured deployments (coverage, MAPE per group, ranking agreement, worst rows)."""
    from sim.validate.report import write_report
    from sim.validate.select import Filters, dataset_path, ids_file, validate

    if dataset == PUBLISHED:
        _published(out)
        return
    if engine is not None and engine not in ("sglang", "trtllm", "vllm"):
        raise usage_error(f"--engine {engine}: use sglang, trtllm or vllm")
    if mode is not None and mode not in ("agg", "disagg"):
        raise usage_error(f"--mode {mode}: use agg or disagg")
    if request_path not in REQUEST_PATHS:
        raise usage_error(f"--request-path {request_path}: use {' or '.join(REQUEST_PATHS)}")
    f = Filters(model, gpu, engine, mode, ids_file(ids) if ids else None, limit)
    try:
        be = make_backend(backend, jobs=jobs)
    except BackendError as exc:
        raise usage_error(f"--backend {backend}: {exc}") from None
    try:
        with be:
            counts = BenchCounts(warmup_per_user, requests_per_user, request_path=request_path)
            s = validate(dataset_path(dataset), f, out, be, _progress(every), counts)
    except RowsError as exc:
        raise usage_error(str(exc)) from None
    try:
        paths = write_report(out, s, f"Validation against {dataset}")
    except ValueError as exc:  # plotly missing: the results are in the journal already
        raise usage_error(str(exc)) from None
    if docs is not None:
        from sim.validate.report import docs_section, update_docs

        command = "mlasim validate " + " ".join(sys.argv[2:])
        paths.append(update_docs(docs, docs_section(s, command)))
    if as_json:
        print(json.dumps({k: v for k, v in s.items() if k != "records"}, indent=1))
        return
    h = s["headline"]
    print(
        f"{s['simulated']} of {s['rows']} rows simulated; TTFT MAPE {h['ttft_mape']}, TPOT MAPE "
        f"{h['tpot_mape']}, ranking by TPOT {h['rank_tpot']}, by tok/s {h['rank_tok_s']}"
    )
    for reason, n in s["coverage"].items():
        print(f"  {n:5d} {reason}")
    print("wrote " + ", ".join(str(p) for p in paths))


def _published(out: Path) -> None:
    """The published deployments' table (docs/validation.md), from its generator in a source
    checkout's tools/validation_table.py, printed and written to `<out>/published.md`."""
    import importlib.util

    from sim.io.journal import write_atomic

    script = Path(__file__).resolve().parent.parent / "tools" / "validation_table.py"
    spec = importlib.util.spec_from_file_location("validation_table", script)
    if not script.is_file() or spec is None or spec.loader is None:
        raise usage_error(f"--dataset published needs a source checkout: {script} not found")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    text: str = mod.table()
    print(text)
    print(f"wrote {write_atomic(out / 'published.md', text)}")


def register(app: typer.Typer) -> None:
    """Add `validate` to the `mlasim` app."""
    app.command(name="validate")(validate)
