"""A plan as a scenario file: its top candidates, every copy behind one router, at the target.

`OUT/scenario.yaml` holds the top K rows on the best row's GPU type (a scenario has one GPU)
as deployments `top1_...`, `top2_...`, each with all its copies (a unit's `replicas`, or each PD
pool's units times the slices), under the plan's whole load: the target rate as one Poisson
stream, or the users as one closed loop. `mlasim run OUT/scenario.yaml` re-runs the plan's
choice as a user would deploy it; the planner probed one copy at its share of the load, so this
is also the check that the choice holds up behind one router. The run lasts five request
lifetimes after one of warm-up (at least 30 arrivals in the window for a rate).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from sim.plan.planner import Plan, deployment_of
from sim.specs.deployment import PdDeployment

RUN_LIFETIMES = 5.0


def whole_deployment(row: dict[str, Any], name: str) -> dict[str, Any]:
    """A plan row's deployment with all its copies, as scenario data named `name`."""
    dep = deployment_of(row)
    k = row["replicas"]
    if isinstance(dep, PdDeployment):
        pools = {p: getattr(dep, p) for p in ("prefill", "decode")}
        dep = dep.model_copy(
            update={p: d.model_copy(update={"replicas": d.replicas * k}) for p, d in pools.items()}
        )
    else:
        dep = dep.model_copy(update={"replicas": dep.replicas * k})
    return dep.model_copy(update={"name": name}).model_dump(mode="json", exclude_defaults=True)


def _name(i: int, label: str) -> str:
    return re.sub(r"\W", "_", f"top{i}_{label}")[:80]


def plan_scenario(plan: Plan) -> dict[str, Any] | None:
    """The scenario data of the plan's top rows on the best row's GPU (None: nothing met)."""
    best = plan.best
    if best is None:
        return None
    req = plan.request
    rows = [r for r in plan.top if r["gpu"] == best["gpu"]]
    life = req.lifetime_s
    lengths: dict[str, Any] = {"input": req.input.model_dump(mode="json"),
               "output": req.output.model_dump(mode="json")}  # fmt: skip
    if req.prefix_cache_fraction:
        lengths["prefix_cache_fraction"] = req.prefix_cache_fraction
    window = RUN_LIFETIMES * life
    if req.rate_req_s is not None:
        window = max(window, 30 / req.rate_req_s)
        workload: dict[str, Any] = {"kind": "poisson", "rate_req_s": req.rate_req_s, **lengths}
    else:
        workload = {"kind": "closed", "concurrency": req.users, **lengths}
    others = sorted({r["gpu"] for r in plan.top} - {best["gpu"]})
    note = (
        f"; top rows on {', '.join(others)} are left out (one GPU per scenario)" if others else ""
    )
    return {
        "name": f"plan_{req.model}_{best['gpu']}".replace("/", "_"),
        "description": f"mlasim plan's top {len(rows)} for {req.model} on {best['gpu']}, all "
        f"copies behind one router at the plan's load{note}",
        "model": req.model, "gpu": best["gpu"],
        "deployments": [whole_deployment(r, _name(i, r["layout"])) for i, r in enumerate(rows, 1)],
        "workload": workload, "slo": req.slo.model_dump(mode="json"),
        "run": {"duration_s": life + window, "warmup_s": life, "seed": req.probe.seed},
    }  # fmt: skip


def scenario_yaml(plan: Plan) -> str | None:
    data = plan_scenario(plan)
    if data is None:
        return None
    head = "# written by `mlasim plan`; run it with `mlasim run <this file>`\n"
    return head + yaml.safe_dump(data, sort_keys=False)
