"""The app's default What-if: CPU per deployment (target: 0.3 s of CPU each, issue #24).

Builds the scenario the What-if page starts from (`app.pages_.whatif.DEFAULT` on its default
model and GPU, deepseek-v3 on h200, the GPU's roofline profile), splits it into one part per
deployment as the page does (`app.runner.split`) and simulates each part in this process with the
function the app's worker processes run (`app.workers.simulate`), best of three, after the
worker's own start-up (`app.workers.warm_up`). Each deployment is timed twice: cold, its cost
model built anew each run (a worker's first Run of it: what the target is judged on), and
warm, with the model the worker kept from its previous run (`sim.run.default_cost_factory`:
the same prices from warm memos; the page's next Run). CPU time is `time.process_time`; wall
time beside it (a busy machine inflates the wall). Beside them, the Python and C function
calls of one more run, counted (`sys.setprofile`): the same to within 0.01% on every run and
machine (the wall-time watch's ticks vary a little), so a change that moves the CPU time by
less than this shared machine's run-to-run spread (20-30%) still shows in it. A call is not a
unit of work, though: a change that replaces a numpy call by a few Python calls does less work
in more calls. `--instructions` counts what each cold run executes under valgrind's callgrind
(`bench/callgrind.py`; about four minutes), the figure to compare two versions by.

    python bench/bench_app.py
    python bench/bench_app.py --instructions   # with each cold run's instructions (valgrind)
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the app is not an installed package

import callgrind  # bench/, the script's own folder

from app import runner, workers
from app.pages_.whatif import DEFAULT
from sim.run import forget_cost_models
from sim.specs.scenario import Scenario

RUNS = 3
TARGET_CPU_S = 0.3


def counted_calls(run: Callable[[], object]) -> int:
    """Python and C function calls `run()` makes (a deterministic proxy for its CPU time)."""
    calls = 0

    def count(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(count)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--instructions",
        action="store_true",
        help="also count each cold run's instructions under callgrind (valgrind)",
    )
    ap.add_argument("--callgrind-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    parts = _warm_parts()
    if args.callgrind_child:  # under callgrind: each cold run between two marks
        for part in parts:
            forget_cost_models()
            callgrind.mark()
            workers.simulate(part)
        callgrind.mark()
        return 0
    print(f"app default What-if ({len(parts)} deployments, {DEFAULT['run']['duration_s']:g} "
          f"simulated s each), best of {RUNS}:")  # fmt: skip
    worst_cpu_s = 0.0
    for part in parts:
        name = Scenario.model_validate_json(part).deployments[0].name
        for cold in (True, False):
            best, calls = _timed(part, cold)
            if cold:
                worst_cpu_s = max(worst_cpu_s, best[0])
            print(f"  {name:<10} {'cold' if cold else 'warm'}  {best[0]:6.3f} s CPU  "
                  f"{best[1]:6.3f} s wall  {calls:,} calls")  # fmt: skip
    verdict = "met" if worst_cpu_s <= TARGET_CPU_S else "not met"
    print(f"target {TARGET_CPU_S} s of CPU per deployment, cold: {verdict}")
    if args.instructions:
        _instructions(parts)
    return 0


def _warm_parts() -> list[str]:
    """The default What-if's parts, one per deployment, after a warm worker's start-up."""
    scenario = Scenario.model_validate({**DEFAULT, "model": "deepseek-v3", "gpu": "h200"})
    parts = runner.split(scenario)
    workers.warm_up()  # the catalog loaded and start-up frozen, as in a warm worker
    workers.simulate(parts[0])  # the rest of the imports a run makes
    return parts


def _instructions(parts: list[str]) -> None:
    """Print each deployment's cold-run instructions, counted in a child under callgrind."""
    if not callgrind.available():
        print("instructions: valgrind is not installed (apt install valgrind), not counted")
        return
    print("instructions of one cold run each (callgrind; a few minutes) ...", flush=True)
    counts = callgrind.count([__file__, "--callgrind-child"], len(parts))
    for part, n in zip(parts, counts, strict=True):
        name = Scenario.model_validate_json(part).deployments[0].name
        print(f"  {name:<10} cold  {n / 1e6:,.1f} M instructions")


def _timed(part: str, cold: bool) -> tuple[tuple[float, float], int]:
    """(CPU and wall seconds of the best of `RUNS` runs of `part`, its calls counted once more);
    `cold`: the cost models forgotten before each run."""
    best: tuple[float, float] | None = None
    for _ in range(RUNS):
        if cold:
            forget_cost_models()
        c0, w0 = time.process_time(), time.perf_counter()
        workers.simulate(part)
        took = (time.process_time() - c0, time.perf_counter() - w0)
        best = took if best is None or took[0] < best[0] else best
    assert best is not None
    if cold:
        forget_cost_models()
    return best, counted_calls(lambda: workers.simulate(part))


if __name__ == "__main__":
    raise SystemExit(main())
