"""Throughput against offered load in the app: `sim.search.load` on the app's worker pool.

Open-loop workloads scale `rate_req_s`; closed-loop ones scale the concurrency. Each point is a
whole scenario (every deployment at that load, on the same workload and seed): under an open
loop with `run.duration_s` its deployments see the same requests at the same times; a closed
loop shares only the request lengths. Points run in the app's warmed-up worker processes
(`app.workers`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

from sim.api import DEFAULT_FACTORS, Curves, ProcessBackend, load_of, run_load_sweep
from sim.api import load_points as sweep_scenarios
from sim.specs.scenario import Scenario

__all__ = ["DEFAULT_FACTORS", "load_of", "run_sweep", "sweep_scenarios", "table_rows"]


def run_sweep(
    pool: ProcessPoolExecutor,
    scenario: Scenario,
    factors: Sequence[float] = DEFAULT_FACTORS,
    on_point: Callable[[int, int], None] | None = None,
) -> Curves:
    """Per deployment: offered load, output tok/s per GPU, p90 TPOT, goodput and the SLO verdict
    at each point."""
    with ProcessBackend(executor=pool) as backend:  # the app's pool stays open
        return run_load_sweep(scenario, factors, backend, on_point)


def table_rows(curves: Curves, field: str) -> list[dict[str, str | float | None]]:
    """The sweep as the page's table: readable names, latency in ms (as the cards), rounded."""
    return [
        {
            "deployment": name,
            field.replace("_", " "): p[field],
            "out tok/s/GPU": round(p["output_tok_s_per_gpu"]),
            "TPOT p90 ms": None if math.isnan(p["tpot_p90_s"]) else round(p["tpot_p90_s"] * 1e3, 1),
            "goodput req/s": round(p["goodput_req_s"], 2),
            "SLO met": "yes" if p["slo_met"] else "no",
        }
        for name, pts in curves.items()
        for p in pts
    ]
