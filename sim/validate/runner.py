"""Run mapped rows on a backend, resumably: one journal record per finished row.

Each finished row is appended (flushed, fsynced) to `results.jsonl` in the output folder as it
comes back, keyed by its row id, so a run killed by SIGINT or SIGKILL loses at most the rows in
flight; started again on the same folder it skips the rows the journal holds that this
simulator computed (`simulator_fingerprint`: a row recorded by other code, after a change to
the cost model say, is run again rather than read back as if it were current). A row the
simulator refuses on its inputs (a deployment whose weights do not fit its GPUs, ...) is recorded
with status "error" and its message, never dropped.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from sim.io.journal import Journal
from sim.search.backends import Backend, RunError
from sim.validate.mapping import Mapped
from sim.validate.rows import closed_loop_tok_s

JOURNAL_NAME = "results.jsonl"
ProgressFn = Callable[[int, int, str], None]  # (rows done, rows to run, last row id)


def _pools(results: dict[str, Any]) -> list[dict[str, Any]]:
    dep = results["deployments"][0]
    return [
        {
            "name": p["name"],
            "step_time_s": p["step_time_s"],
            "step_breakdown_s": p["step_breakdown_s"],
            "step_sources": p["step_sources"],
            "extrapolated_ops": p["extrapolated_ops"],
        }
        for p in dep["pools"]
    ]


def record_of(m: Mapped, results: dict[str, Any], wall_s: float) -> dict[str, Any]:
    """The journal record of one simulated row: its identity, measured and predicted figures
    (the benchmark client's mean TTFT and mean per-request TPOT over the measured requests,
    warm-up left out; output tok/s per GPU from them as the closed loop gives it), the
    profile, the per-pool step breakdown with sources, and the wall time."""
    r = m.row
    dep = results["deployments"][0]
    bench = dep.get("benchmark")
    rec: dict[str, Any] = {**_identity(m), "status": "ok", "wall_s": round(wall_s, 3)}
    if bench is None or bench["ttft"]["mean_ms"] is None or bench["tpot"]["mean_ms"] is None:
        return {**rec, "status": "error", "error": "no benchmark request finished in the run"}
    ttft_ms, tpot_ms = bench["ttft"]["mean_ms"], bench["tpot"]["mean_ms"]
    rec.update(
        pred_ttft_ms=ttft_ms,
        pred_tpot_ms=tpot_ms,
        pred_tok_s_per_gpu=closed_loop_tok_s(r.concurrency, r.osl, ttft_ms, tpot_ms) / m.gpus,
        sim_output_tok_s_per_gpu=bench["output_throughput_tok_s"] / m.gpus,
        pools=_pools(results),
    )
    return rec


def _benchmark(m: Mapped) -> dict[str, int | str]:
    """The benchmark's request counts and request path: a journal record is reused only by a
    run with the same."""
    w = m.scenario.workload
    return {
        "warmup_requests": getattr(w, "warmup_requests", 0),
        "num_prompts": getattr(w, "num_prompts", 0),
        "request_path": getattr(w, "request_path", "none"),
    }


@cache
def simulator_fingerprint() -> str:
    """A digest of the simulator's own files (the `sim` package's code and bundled data): the
    results of two runs compare only where it is the same."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".json", ".yaml") and "__pycache__" not in path.parts:
            h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def _identity(m: Mapped) -> dict[str, Any]:
    r = m.row
    return {
        "id": r.id,
        "simulator": simulator_fingerprint(),
        "model": m.scenario.model,
        "gpu": m.scenario.gpu,
        "engine": r.backend,
        "backend_version": r.backend_version,
        "mode": r.mode,
        "precision": r.precision,
        "isl": r.isl,
        "osl": r.osl,
        "concurrency": r.concurrency,
        "gpus": m.gpus,
        "layout": m.layout,
        "profile": m.profile,
        "meas_ttft_ms": r.ttft_ms,
        "meas_tpot_ms": r.tpot_ms,
        "meas_tok_s_per_gpu": r.measured_tok_s / m.gpus,
        "benchmark": _benchmark(m),
    }


def error_record(m: Mapped, message: str, wall_s: float) -> dict[str, Any]:
    return {**_identity(m), "status": "error", "error": message, "wall_s": round(wall_s, 3)}


def _finished(journal: Journal, m: Mapped) -> bool:
    rec = journal.done.get(m.row.id)
    if rec is None or rec.get("simulator") != simulator_fingerprint():
        return False
    return rec.get("benchmark") == _benchmark(m)


def run_rows(
    mapped: Sequence[Mapped],
    out_dir: str | Path,
    backend: Backend,
    progress: ProgressFn | None = None,
) -> Journal:
    """Simulate every mapped row not yet in `out_dir`'s journal with the same benchmark counts
    by this simulator (a record of other counts or of other code is redone and the new record
    wins); return the journal.

    `wall_s` of a row is the time since the previous row finished: the row's own wall time on
    the serial backend, about its time divided by the workers on a pool."""
    journal = Journal(Path(out_dir) / JOURNAL_NAME)
    todo = [m for m in mapped if not _finished(journal, m)]
    done = 0

    def finished(rec: dict[str, Any]) -> None:
        nonlocal done
        journal.append(rec)
        done += 1
        if progress is not None:
            progress(done, len(todo), rec["id"])

    last = time.perf_counter()
    try:
        for i, res in backend.run([m.scenario for m in todo]):
            now = time.perf_counter()
            finished(record_of(todo[i], res, now - last))
            last = now
    except RunError:  # which row failed is not known: run the rest one at a time
        for m in todo:
            if _finished(journal, m):
                continue
            start = time.perf_counter()
            try:
                [(_, res)] = list(backend.run([m.scenario]))
                finished(record_of(m, res, time.perf_counter() - start))
            except RunError as exc:
                finished(error_record(m, str(exc), time.perf_counter() - start))
    return journal
