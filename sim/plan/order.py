"""Simulating candidates cheapest first, and skipping those the top K already beats.

The plan ranks what meets the SLO by cost ($/hour where every GPU type is priced, else GPUs).
Candidates are simulated in waves, cheapest first. Once K candidates of a kind (colocated units,
PD slices) meet the SLO, a candidate of that kind that costs more than the K-th of them cannot
enter the top K of its kind: it is dominated, counted under the rule 'dominated' and listed with
its reason instead of being simulated. The verdict compares the best of each kind, so each kind
keeps its own K. Ties in cost are still simulated (the table breaks them by tok/s per user).
`PlanRequest.simulate_all` turns the rule off, for a Pareto frontier over every candidate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sim.io.journal import Journal
from sim.plan import price as pricing
from sim.plan.run import Candidate, ProgressFn, run_candidates
from sim.plan.spec import PlanRequest
from sim.search.backends import Backend

CostFn = Callable[[Candidate], float]
WAVE_PER_JOB = 2  # candidates per worker in a wave: enough to keep the pool busy between bounds


def cost_key(req: PlanRequest) -> tuple[CostFn, str]:
    """What ranks candidates before they run: $/hour when every GPU type has a price, else GPUs
    (the same choice `planner.ranked` makes), and its unit."""
    if all(pricing.gpu_price(g.lower(), req.gpu_hour_usd) is not None for g in req.gpus):

        def usd(c: Candidate) -> float:
            p = pricing.gpu_price(c.layout.gpu, req.gpu_hour_usd)
            return float(pricing.usd_per_hour(c.gpus, p) or c.gpus)

        return usd, "$/hour"
    return (lambda c: float(c.gpus)), "GPUs"


def _kth(rows: list[dict[str, Any]], kind: str, k: int, cost: dict[str, float]) -> float | None:
    met = sorted(cost[r["id"]] for r in rows if r["kind"] == kind and r.get("slo_met"))
    return met[k - 1] if len(met) >= k else None


def simulate_cheapest_first(
    candidates: list[Candidate],
    req: PlanRequest,
    backend: Backend,
    journal: Journal | None = None,
    progress: ProgressFn | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(rows of the simulated candidates, cheapest first; one reason row per dominated one)."""
    cost, unit = cost_key(req)
    order = sorted(candidates, key=lambda c: (cost(c), c.gpus))
    wave = max(4, WAVE_PER_JOB * int(getattr(backend, "jobs", 1) or 1))
    rows: list[dict[str, Any]] = []
    dominated: list[dict[str, Any]] = []
    costs: dict[str, float] = {}
    pos = 0
    while pos < len(order):
        bounds = {k: _kth(rows, k, req.top, costs) for k in ("unit", "pd")}
        batch: list[Candidate] = []
        while pos < len(order) and len(batch) < wave:
            c = order[pos]
            pos += 1
            bound = None if req.simulate_all else bounds[c.layout.kind]
            if bound is not None and cost(c) > bound:
                dominated.append(_dominated(c, cost(c), bound, unit, req.top))
            else:
                batch.append(c)
        new = run_candidates(batch, req, backend, journal, _offset(progress, len(rows), len(order)))
        for c, row in zip(batch, new, strict=True):
            costs[row["id"]] = cost(c)
        rows += new
    return rows, dominated


def _offset(progress: ProgressFn | None, done: int, total: int) -> ProgressFn | None:
    """A wave's progress as progress over the whole search."""
    if progress is None:
        return None
    return lambda k, n: progress(done + k, total)


def _dominated(c: Candidate, cost: float, bound: float, unit: str, k: int) -> dict[str, Any]:
    kind = "PD slices" if c.layout.kind == "pd" else "colocated units"
    fmt = (lambda v: f"${v:,.2f}/hour") if unit == "$/hour" else (lambda v: f"{v:g} GPUs")
    return {
        "gpu": c.layout.gpu, "layout": c.layout.label, "replicas": c.replicas,
        "rule": "dominated",
        "reason": f"{c.replicas} copies cost {fmt(cost)}, more than the {k} cheapest {kind} "
        f"already meeting the SLO (the dearest of them: {fmt(bound)}): it cannot enter the top {k}",
    }  # fmt: skip
