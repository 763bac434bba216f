"""The planner end to end: layouts -> pruning -> simulation -> ranked plan with cost and launch
commands. `make_plan(request, backend)` is what `mlasim plan` and the app's Plan page call."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sim.io.journal import Journal
from sim.plan import price as pricing
from sim.plan.launch import launch_commands
from sim.plan.order import simulate_cheapest_first
from sim.plan.prune import RULES, prune
from sim.plan.run import Candidate, ProgressFn
from sim.plan.space import layouts
from sim.plan.spec import PlanRequest
from sim.search.backends import Backend
from sim.specs.deployment import Deployment, PdDeployment


@dataclass
class Plan:
    """A plan's answer: every candidate row, what pruning removed, the top K, the verdict."""

    request: PlanRequest
    rows: list[dict[str, Any]]
    space_size: int
    removed: dict[str, int]
    pruned: list[dict[str, Any]]
    top: list[dict[str, Any]] = field(default_factory=list)
    verdict: str = ""
    wall_s: float = 0.0
    simulated: int = 0

    @property
    def best(self) -> dict[str, Any] | None:
        return self.top[0] if self.top else None

    def to_json(self) -> dict[str, Any]:
        return {
            "request": self.request.model_dump(mode="json"), "space_size": self.space_size,
            "removed": self.removed, "simulated": self.simulated, "wall_s": self.wall_s,
            "verdict": self.verdict, "top": self.top, "rows": self.rows, "pruned": self.pruned,
        }  # fmt: skip


def _resolve(req: PlanRequest) -> dict[str, Any]:
    """GPU name -> (model, GPU, profile), resolved once; CatalogError for an unknown name."""
    from sim.catalog import load_gpu, load_model
    from sim.catalog.profiles import load_profile, scenario_profile_name

    model = load_model(req.model)
    out = {}
    for name in req.gpus:
        gpu = load_gpu(name)
        prof = scenario_profile_name(None, gpu.name)
        out[gpu.name] = (model, gpu, None if prof is None else load_profile(prof))
    return out


def make_plan(
    req: PlanRequest,
    backend: Backend,
    journal: Journal | None = None,
    progress: ProgressFn | None = None,
) -> Plan:
    """Search the request's space on every GPU type and rank what meets the SLO."""
    started = time.perf_counter()
    resolved = _resolve(req)
    lays = [lay for g, (m, gpu, _) in resolved.items() for lay in layouts(req, m, gpu)]
    pr = prune(lays, req, resolved)
    cands = [Candidate(lay, k, req.model) for lay, counts, _ in pr.kept for k in counts]
    rows, dominated = simulate_cheapest_first(cands, req, backend, journal, progress)
    for row in rows:
        _add_cost(row, req)
    removed = {r: pr.removed.get(r, 0) for r in RULES}
    removed["dominated"] = len(dominated)
    plan = Plan(
        request=req, rows=rows, space_size=len(lays) * req.space.loads,
        removed=removed, pruned=pr.reasons + dominated, simulated=len(rows),
    )  # fmt: skip
    plan.top = ranked(rows, req)[: req.top]
    for row in plan.top:
        row["launch"] = commands(row, req, resolved[row["gpu"]][1])
    plan.verdict = verdict(rows, req)
    plan.wall_s = time.perf_counter() - started
    return plan


def _add_cost(row: dict[str, Any], req: PlanRequest) -> None:
    p = pricing.gpu_price(row["gpu"], req.gpu_hour_usd)
    row["usd_per_hour"] = pricing.usd_per_hour(row["gpus"], p)
    row["usd_per_m_tokens"] = pricing.usd_per_million_tokens(
        row["usd_per_hour"], row.get("output_tok_s")
    )
    row["price_source"] = p.source if p else None


def ranked(rows: list[dict[str, Any]], req: PlanRequest) -> list[dict[str, Any]]:
    """Rows that meet the SLO, cheapest first: by $/hour where every one is priced, else by
    GPUs; ties go to the faster tokens per user."""
    ok = [r for r in rows if r.get("slo_met")]
    priced = all(r.get("usd_per_hour") is not None for r in ok)

    def key(r: dict[str, Any]) -> tuple[float, float]:
        first = r["usd_per_hour"] if priced else r["gpus"]
        return (first, -(r.get("tok_s_per_user") or 0.0))

    return sorted(ok, key=key)


def deployment_of(row: dict[str, Any]) -> Deployment | PdDeployment:
    spec = row["spec"]
    return (
        PdDeployment.model_validate(spec)
        if row["kind"] == "pd"
        else Deployment.model_validate(spec)
    )


def commands(row: dict[str, Any], req: PlanRequest, gpu: Any) -> dict[str, list[str]]:
    return launch_commands(req.model, deployment_of(row), gpu, row["replicas"])


def verdict(rows: list[dict[str, Any]], req: PlanRequest) -> str:
    """Colocated or disaggregated: the cheapest of each that meets the SLO, compared."""
    best = {}
    for kind in ("unit", "pd"):
        top = ranked([r for r in rows if r["kind"] == kind], req)
        best[kind] = top[0] if top else None
    agg, dis = best["unit"], best["pd"]
    if agg is None and dis is None:
        return "no candidate met the SLO: relax it, allow more GPUs, or widen the space"
    if dis is None:
        return f"aggregated: {agg['layout']} x{agg['replicas']} on {agg['gpus']} {agg['gpu']}; no PD slice met the SLO"  # type: ignore[index]  # noqa: E501
    if agg is None:
        return f"disaggregated: {dis['layout']} x{dis['replicas']} on {dis['gpus']} {dis['gpu']}; no colocated unit met the SLO"  # noqa: E501
    pick, other = (agg, dis) if ranked([agg, dis], req)[0] is agg else (dis, agg)
    word = "aggregated" if pick is agg else "disaggregated"
    return (
        f"{word}: {pick['layout']} x{pick['replicas']} needs {pick['gpus']} {pick['gpu']} GPUs "
        f"against {other['gpus']} for the best {'PD slice' if pick is agg else 'colocated unit'} "
        f"({other['layout']} x{other['replicas']})"
    )


def pareto(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Simulated rows no other row beats on both tok/s per GPU and tok/s per user."""
    pts = [r for r in rows if r.get("output_tok_s_per_gpu") and r.get("tok_s_per_user")]
    pts.sort(key=lambda r: (-r["tok_s_per_user"], -r["output_tok_s_per_gpu"]))
    front, best = [], -1.0
    for r in pts:
        if r["output_tok_s_per_gpu"] > best:
            front.append(r)
            best = r["output_tok_s_per_gpu"]
    return front
