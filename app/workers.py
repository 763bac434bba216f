"""Worker processes: simulations run off the Streamlit server process, several at a time.

Processes start with 'spawn' (the server is multi-threaded, where fork is unsafe) and import
the simulator once (`warm_up`), so a run pays no start-up. Every function here that a worker
calls takes and returns JSON-able values only.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing.managers import SyncManager
from typing import Any

from sim.api import (
    SimOutput,
    gpu_names,
    load_gpu,
    load_model,
    model_names,
    request_latencies,
    run_scenario,
)
from sim.specs.limits import wall_watch
from sim.specs.scenario import Scenario


@dataclass(frozen=True)
class Workers:
    """A process pool and a manager whose queues carry progress back from the workers."""

    pool: ProcessPoolExecutor
    manager: SyncManager

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.manager.shutdown()


def start(workers: int | None = None) -> Workers:
    """Start the pool (at most 4 workers, one per core) and warm every worker up."""
    ctx = multiprocessing.get_context("spawn")
    n = workers or max(1, min(4, os.cpu_count() or 1))
    pool = ProcessPoolExecutor(max_workers=n, mp_context=ctx)
    for _ in range(n):
        pool.submit(warm_up)
    manager = SyncManager(ctx=ctx)
    manager.start()
    return Workers(pool=pool, manager=manager)


def warm_up() -> None:
    """Read the catalog in a fresh worker (importing this module imported the simulator), so
    the first real run does not pay for it; then move what start-up left (modules, catalog,
    some 130k objects) out of the garbage collector's reach (`gc.freeze`). A run's priced
    shapes and requests outlive a few collections, and each full collection would walk all of
    start-up's objects again: 0.09-0.11 s of a 0.3-0.5 s What-if run, measured."""
    for name in model_names():
        load_model(name)
    for name in gpu_names():
        load_gpu(name)
    gc.collect()
    gc.freeze()


WAITING = "TTFT waiting"  # samples key: how long requests still waiting at the end waited


def latency_samples(out: SimOutput) -> dict[str, list[float]]:
    """Per-request TTFT (requests that arrived after warm-up and got a first token), TPOT and
    E2E (those that completed), and under `WAITING` the waits of requests still without a
    first token at the end: the samples `sim.metrics.summarize` reports the percentiles of."""
    lat = request_latencies(out.record)
    samples = {k: v.tolist() for k, v in lat.samples().items()}
    samples[WAITING] = lat.ttft_censored().tolist()
    return samples


def simulate(scenario_json: str, progress: Any = None) -> dict[str, Any]:
    """Results (JSON contract) and per-request latencies of a scenario; `progress`, if given, is
    a queue that receives (deployment name, fraction of simulated time done)."""
    start_s = time.perf_counter()
    scenario = Scenario.model_validate_json(scenario_json)
    show = None if progress is None else (lambda name, f: progress.put((name, f)))
    outputs: list[SimOutput] = []  # every tick also checks the wall-time limit
    results = run_scenario(scenario, progress=wall_watch(show), on_output=outputs.append)
    return {
        "results": results.model_dump(mode="json"),
        "samples": {o.deployment.name: latency_samples(o) for o in outputs},
        "sim_wall_s": time.perf_counter() - start_s,
    }
