"""Throughput against offered load: one scenario per load point, run in parallel processes.

Open-loop workloads scale `rate_req_s`; closed-loop ones scale the concurrency. Each point is a
whole scenario (every deployment at that load), so a point's deployments see the same requests.
Points run in the app's worker processes (`app.workers`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from typing import Any

from app.workers import run_point
from sim.specs.scenario import Scenario

DEFAULT_FACTORS = (0.5, 1.0, 1.5, 2.0)


def load_of(scenario: Scenario) -> tuple[str, float]:
    """(what the load is, its value) of the scenario's workload."""
    w = scenario.workload
    if w.kind in ("poisson", "gamma"):
        return "rate_req_s", float(w.rate_req_s)
    if w.kind == "closed":
        field = "concurrency" if w.concurrency is not None else "concurrency_per_rank"
        return field, float(getattr(w, field))
    raise ValueError("a load sweep needs a poisson, gamma or closed workload (not a trace)")


def sweep_scenarios(scenario: Scenario, factors: Sequence[float]) -> list[tuple[float, Scenario]]:
    """(offered load, scenario at that load) for each factor of the scenario's own load."""
    field, base = load_of(scenario)
    out = []
    for f in factors:
        load = base * f if field == "rate_req_s" else max(1, round(base * f))
        workload = scenario.workload.model_copy(update={field: load})
        data = scenario.model_dump(mode="json") | {"workload": workload.model_dump(mode="json")}
        out.append((float(load), Scenario.model_validate(data)))
    return out


def run_sweep(
    pool: ProcessPoolExecutor,
    scenario: Scenario,
    factors: Sequence[float] = DEFAULT_FACTORS,
    on_point: Callable[[int, int], None] | None = None,
) -> dict[str, list[dict[str, float]]]:
    """Per deployment: offered load, output tok/s per GPU, p90 TPOT and goodput at each point."""
    points = sweep_scenarios(scenario, factors)
    field, _ = load_of(scenario)
    futures: dict[Future[dict[str, Any]], float] = {
        pool.submit(run_point, json.dumps(s.model_dump(mode="json"))): load for load, s in points
    }
    curves: dict[str, list[dict[str, float]]] = {d.name: [] for d in scenario.deployments}
    for k, fut in enumerate(as_completed(futures), start=1):
        load = futures[fut]
        for d in fut.result()["deployments"]:
            curves[d["name"]].append(
                {
                    field: load,
                    "output_tok_s_per_gpu": d["output_tok_s_per_gpu"],
                    "tpot_p90_s": d["tpot_s"]["p90"] or float("nan"),
                    "goodput_req_s": d["goodput_req_s"],
                }
            )
        if on_point is not None:
            on_point(k, len(points))
    for pts in curves.values():
        pts.sort(key=lambda p: p[field])
    return curves
