"""Throughput against offered load in the app: `sim.search.load` on the app's worker pool.

Open-loop workloads scale `rate_req_s`; closed-loop ones scale the concurrency. Each point is a
whole scenario (every deployment at that load), so a point's deployments see the same requests.
Points run in the app's warmed-up worker processes (`app.workers`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

from sim.api import DEFAULT_FACTORS, ProcessBackend, load_of, run_load_sweep
from sim.api import load_points as sweep_scenarios
from sim.specs.scenario import Scenario

__all__ = ["DEFAULT_FACTORS", "load_of", "run_sweep", "sweep_scenarios"]


def run_sweep(
    pool: ProcessPoolExecutor,
    scenario: Scenario,
    factors: Sequence[float] = DEFAULT_FACTORS,
    on_point: Callable[[int, int], None] | None = None,
) -> dict[str, list[dict[str, float]]]:
    """Per deployment: offered load, output tok/s per GPU, p90 TPOT and goodput at each point."""
    with ProcessBackend(executor=pool) as backend:  # the app's pool stays open
        return run_load_sweep(scenario, factors, backend, on_point)
