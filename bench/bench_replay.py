"""The engine's own CPU per step at the benchmark's full batch: the real run's step costs replayed.

`bench_engine.py --cost standin` times the engine in another regime (~10 requests per rank, not
the ~120 of the real run). This script runs `bench_engine`'s decode case once with the real cost
model, keeping every `StepCost` it returned, then runs the same case again `--repeats` times
with a cost model that hands those back in order (it prices nothing). The engine makes the same
decisions, so each replay's digest must equal the real run's; its CPU is the engine's alone
(plus simpy and the replay's list lookup). Figures are CPU time (`time.process_time`).

    python bench/bench_replay.py                      # one simulated hour, 3 replays
    python bench/bench_replay.py --duration-s 600 --repeats 5

Run on one core (`taskset -c 0`); on a shared machine compare builds in interleaved runs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from bench_engine import DEPLOYMENT, digest, real_cost, workload

from sim.cost.batch import BatchShape, StepCost
from sim.engine import simulate
from sim.specs import RunSpec


class Recording:
    """The real cost model, keeping every step cost it returns (and the batch size it priced)."""

    def __init__(self, cost: Any) -> None:
        self.cost = cost
        self.steps: list[tuple[int, StepCost]] = []

    def step_cost(self, batch: BatchShape) -> StepCost:
        out: StepCost = self.cost.step_cost(batch)
        self.steps.append((batch.size, out))
        return out

    def __getattr__(self, name: str) -> Any:  # capacity, KV bytes: the model's own
        return getattr(self.cost, name)


class Replay:
    """Hands back a recorded run's step costs in order; a batch of another size is an error."""

    def __init__(self, rec: Recording) -> None:
        self.rec, self.i = rec, 0

    def step_cost(self, batch: BatchShape) -> StepCost:
        size, out = self.rec.steps[self.i]
        if batch.size != size:
            raise RuntimeError(f"step {self.i}: {batch.size} segments, the recorded run had {size}")
        self.i += 1
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.rec.cost, name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration-s", type=float, default=3600.0)
    ap.add_argument("--rate", type=float, default=194.0, help="requests per second")
    ap.add_argument("--output-mean", type=float, default=1600.0, help="mean answer, tokens")
    ap.add_argument("--warmup-s", type=float, default=300.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    run = RunSpec(duration_s=args.duration_s, warmup_s=min(args.warmup_s, args.duration_s / 4))
    wl = workload(args.rate, args.output_mean)
    rec = Recording(real_cost(DEPLOYMENT))
    c0 = time.process_time()
    want = digest(simulate(DEPLOYMENT, lambda _: rec, wl, run))
    real_cpu = time.process_time() - c0
    steps = len(rec.steps)
    print(f"real run   : {real_cpu:.2f} s CPU, {steps:,} steps, digest {want}")
    per_step: list[float] = []
    for k in range(args.repeats):
        rp = Replay(rec)
        c0 = time.process_time()
        got = digest(simulate(DEPLOYMENT, lambda _, rp=rp: rp, wl, run))
        cpu = time.process_time() - c0
        per_step.append(cpu / steps * 1e6)
        verdict = "identical" if got == want else f"DIFFERS ({got})"
        print(f"replay {k + 1}   : {cpu:.2f} s CPU, {per_step[-1]:,.0f} us per step, {verdict}")
        if got != want:
            raise SystemExit(1)
    print(f"engine     : {min(per_step):,.0f} us per step at best, "
          f"{statistics.median(per_step):,.0f} median of {len(per_step)} replays")  # fmt: skip


if __name__ == "__main__":
    main()
