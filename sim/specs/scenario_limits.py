"""What a scenario would make a run allocate, computed from its fields and held to `Limits`.

Called by `Scenario`'s validator, so every way of building a scenario (a file, `--set`, the app,
a sweep point, a worker) is bounded before anything runs. Trace rows are counted when the trace
is read (`sim.io.workload_csv`); the step log is bounded as it grows (`sim.engine.log`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sim.specs.deployment import Deployment, PdDeployment
from sim.specs.limits import LimitError, Limits, check_data, current_limits, over_limit
from sim.specs.workload import (
    BenchmarkWorkload,
    ClosedWorkload,
    EmpiricalLength,
    FixedLength,
    GammaWorkload,
    LognormalLength,
    PoissonWorkload,
    UniformLength,
)

if TYPE_CHECKING:
    from sim.specs.scenario import Scenario

OPEN_LOOP_SLACK = 1.1  # `open_loop` draws 10% more gaps than the mean count, plus 64


def _lengths(name: str, dist: Any, lim: Limits) -> None:
    if dist is None:
        return
    if isinstance(dist, FixedLength):
        tokens: dict[str, float] = {"tokens": dist.tokens}
    elif isinstance(dist, UniformLength):
        tokens = {"min_tokens": dist.min_tokens, "max_tokens": dist.max_tokens}
    elif isinstance(dist, LognormalLength):
        tokens = {"mean_tokens": dist.mean_tokens, "min_tokens": dist.min_tokens}
        tokens |= {"max_tokens": dist.max_tokens} if dist.max_tokens is not None else {}
    elif isinstance(dist, EmpiricalLength):
        if len(dist.values) > lim.max_empirical_values:
            raise over_limit(
                f"workload.{name}.values", f"{len(dist.values):,} values",
                f"{lim.max_empirical_values:,}", "give a histogram with weights instead",
                ("workload", name, "values"),
            )  # fmt: skip
        tokens = {"values": max(dist.values)}
    else:
        return
    for field, value in tokens.items():
        if value > lim.max_tokens:
            raise over_limit(
                f"workload.{name}.{field}", f"{value:.4g} tokens", f"{lim.max_tokens:,} tokens",
                "give a realistic length (contexts are at most a few hundred thousand tokens)",
                ("workload", name, field),
            )  # fmt: skip


def _pools(dep: Deployment | PdDeployment) -> list[tuple[str, Deployment]]:
    if isinstance(dep, PdDeployment):
        return [("prefill", dep.prefill), ("decode", dep.decode)]
    return [("", dep)]


def _deployment(i: int, dep: Deployment | PdDeployment, lim: Limits) -> int:
    """Bounds on one deployment's sizes; returns the attention ranks of its entry pool."""
    entry_ranks = 0
    for pool, d in _pools(dep):
        at = f"deployments[{i}] ({dep.name})" + (f".{pool}" if pool else "")
        loc: tuple[str | int, ...] = ("deployments", i, *((pool,) if pool else ()))
        if d.gpus > lim.max_gpus_per_unit:
            raise over_limit(
                f"{at}.nodes", f"{d.nodes:,} nodes x {d.gpus_per_node:,} GPUs = {d.gpus:,} GPUs "
                "in one unit", f"{lim.max_gpus_per_unit:,}", "use replicas for more units",
                (*loc, "nodes"),
            )  # fmt: skip
        if d.replicas > lim.max_replicas:
            limit = f"{lim.max_replicas:,}"
            raise over_limit(
                f"{at}.replicas", f"{d.replicas:,}", limit, "use fewer", (*loc, "replicas")
            )
        ranks = d.attn_dp * d.replicas
        if ranks > lim.max_total_ranks:
            raise over_limit(
                f"{at}.replicas", f"{ranks:,} attention ranks in all", f"{lim.max_total_ranks:,}",
                "use fewer replicas or a larger attn_tp", (*loc, "replicas"),
            )  # fmt: skip
        for field in ("chunked_prefill_tokens", "page_size_tokens"):
            if getattr(d, field) > lim.max_tokens:
                raise over_limit(
                    f"{at}.{field}", f"{getattr(d, field):,}", f"{lim.max_tokens:,}", "lower it",
                    (*loc, field),
                )  # fmt: skip
        if d.max_running_requests > lim.max_in_flight:
            raise over_limit(
                f"{at}.max_running_requests", f"{d.max_running_requests:,}",
                f"{lim.max_in_flight:,}", "lower it", (*loc, "max_running_requests"),
            )  # fmt: skip
        entry_ranks = entry_ranks or ranks
    return entry_ranks


def _requests(sc: Scenario, ranks: int, lim: Limits) -> None:
    """Requests (or closed-loop users) the run's arrays are sized by."""
    w, run = sc.workload, sc.run
    if isinstance(w, PoissonWorkload | GammaWorkload):
        if run.max_requests is not None:  # `open_loop` draws max_requests gaps up front
            n, field, loc = float(run.max_requests), "run.max_requests", ("run", "max_requests")
            figure = f"{run.max_requests:,} requests"
        else:
            assert run.duration_s is not None  # RunSpec requires one of the two
            n = w.rate_req_s * run.duration_s * OPEN_LOOP_SLACK + 64
            field, loc = "workload.rate_req_s", ("workload", "rate_req_s")
            figure = (
                f"{w.rate_req_s:.4g} req/s x {run.duration_s:.4g} s = "
                f"{w.rate_req_s * run.duration_s:,.0f} requests"
            )
        if n > lim.max_requests:
            raise over_limit(
                field, figure, f"{lim.max_requests:,} requests per run",
                "lower the rate or shorten run.duration_s (or cap run.max_requests)", loc,
            )  # fmt: skip
    if isinstance(w, BenchmarkWorkload):
        n = w.num_prompts + w.warmup_requests
        if n > lim.max_requests:
            raise over_limit(
                "workload.num_prompts", f"{n:,} requests (warm-up included)",
                f"{lim.max_requests:,} requests per run", "send fewer prompts",
                ("workload", "num_prompts"),
            )  # fmt: skip
        if (w.max_concurrency or 0) > lim.max_in_flight:
            raise over_limit(
                "workload.max_concurrency", f"{w.max_concurrency:,} requests in flight",
                f"{lim.max_in_flight:,}", "lower it", ("workload", "max_concurrency"),
            )  # fmt: skip
    if isinstance(w, ClosedWorkload):
        users = w.concurrency or (w.concurrency_per_rank or 0) * ranks
        name = "concurrency" if w.concurrency else "concurrency_per_rank"
        if users > lim.max_in_flight:
            limit = f"{lim.max_in_flight:,}"
            raise over_limit(
                f"workload.{name}",
                f"{users:,} users in flight",
                limit,
                "lower it",
                ("workload", name),
            )
        if w.ramp_s > lim.max_sim_time_s:
            raise over_limit(
                "workload.ramp_s", f"{w.ramp_s:.4g} s", f"{lim.max_sim_time_s:.4g} s", "shorten it",
                ("workload", "ramp_s"),
            )  # fmt: skip


def check_scenario_limits(sc: Scenario, limits: Limits | None = None) -> None:
    """LimitError (a FieldError: its `loc` is the field's path in the scenario) for a scenario
    that would allocate more than `limits` allow, or holds a non-finite number or an oversized
    value."""
    lim = limits or current_limits()
    check_data(sc.model_dump(mode="python", by_alias=False), limits=lim)
    run = sc.run
    if run.duration_s is not None and run.duration_s > lim.max_sim_time_s:
        raise over_limit(
            "run.duration_s", f"{run.duration_s:.4g} s simulated", f"{lim.max_sim_time_s:.4g} s",
            "shorten it", ("run", "duration_s"),
        )  # fmt: skip
    if run.max_requests is not None and run.max_requests > lim.max_requests:
        raise over_limit(
            "run.max_requests", f"{run.max_requests:,}", f"{lim.max_requests:,}", "lower it",
            ("run", "max_requests"),
        )  # fmt: skip
    for name in ("input", "output", "prefix_cache_tokens"):
        _lengths(name, getattr(sc.workload, name, None), lim)
    ranks = [_deployment(i, d, lim) for i, d in enumerate(sc.deployments)]
    _requests(sc, max(ranks), lim)


__all__ = ["LimitError", "check_scenario_limits"]
