"""Throughput against offered load: the scenario's own load scaled by factors, one run per point.

Open-loop workloads (poisson, gamma) scale `rate_req_s`; closed-loop ones scale their
concurrency (rounded, at least 1). Each point is the whole scenario (every deployment at that
load), so a point's deployments run on the same workload and seed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sim.search.backends import Backend
from sim.specs.scenario import Scenario

DEFAULT_FACTORS = (0.5, 1.0, 1.5, 2.0)
# deployment -> points sorted by offered load; each point's figures are floats but `slo_met`
Curves = dict[str, list[dict[str, float | bool]]]


def load_of(scenario: Scenario) -> tuple[str, float]:
    """(workload field that sets the load, its value); ValueError for a trace workload."""
    w = scenario.workload
    if w.kind in ("poisson", "gamma"):
        return "rate_req_s", float(w.rate_req_s)
    if w.kind == "closed":
        field = "concurrency" if w.concurrency is not None else "concurrency_per_rank"
        return field, float(getattr(w, field))
    raise ValueError("a load sweep needs a poisson, gamma or closed workload (not a trace)")


def load_points(scenario: Scenario, factors: Sequence[float]) -> list[tuple[float, Scenario]]:
    """(offered load, scenario at that load) for each factor of the scenario's own load."""
    if any(f <= 0 for f in factors):
        raise ValueError(f"load factors must be > 0, got {list(factors)}")
    field, base = load_of(scenario)
    out = []
    for f in factors:
        load = base * f if field == "rate_req_s" else max(1, round(base * f))
        workload = scenario.workload.model_copy(update={field: load})
        data = scenario.model_dump(mode="json") | {"workload": workload.model_dump(mode="json")}
        out.append((float(load), Scenario.model_validate(data)))
    return out


def run_load_sweep(
    scenario: Scenario,
    factors: Sequence[float],
    backend: Backend,
    on_point: Callable[[int, int], None] | None = None,
) -> Curves:
    """Per deployment: offered load, output tok/s per GPU, p90 TPOT, goodput and whether the
    SLO held, at each point.

    `on_point(done, total)` is called as each point finishes.
    """
    points = load_points(scenario, factors)
    field, _ = load_of(scenario)
    curves: Curves = {d.name: [] for d in scenario.deployments}
    for i, results in backend.run([s for _, s in points], on_point):
        load = points[i][0]
        for d in results["deployments"]:
            curves[d["name"]].append(
                {
                    field: load,
                    "output_tok_s_per_gpu": d["output_tok_s_per_gpu"],
                    "tpot_p90_s": d["tpot_s"]["p90"] or float("nan"),
                    "goodput_req_s": d["goodput_req_s"],
                    "slo_met": bool(d["slo_met"]),
                }
            )
    for pts in curves.values():
        pts.sort(key=lambda p: float(p[field]))
    return curves
