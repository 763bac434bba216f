"""Simulate the candidates that survive pruning, on a backend, journalled and resumable.

Each candidate is one copy of its layout (a unit or a PD slice) at its share of the load: the
target rate over its replica count (an open Poisson stream) or its share of the users (a closed
loop). Copies behind one router share the stream more evenly than independent thinned streams,
so one copy alone is the cautious reading. A probe runs a warm-up and a window measured in
request lifetimes; while the 95% batch-means interval of tok/s per GPU is wider than
`probe.ci_rel` of its value, the window doubles (up to `probe.max_window_lifetimes`), unless the
probe already misses a latency target by half again (`_clear_miss`: longer will not save it).

A candidate whose run fails on its inputs is a row with its reason; the search goes on. Every
finished candidate is appended to the journal, so a rerun with the same journal skips it.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sim.io.journal import Journal
from sim.metrics.results import DeploymentResults
from sim.plan.space import Layout
from sim.plan.spec import PlanRequest
from sim.search.backends import Backend, RunError
from sim.search.capacity import meets_slo
from sim.specs.scenario import Scenario

ProgressFn = Callable[[int, int], None]  # (candidates finished, candidates to simulate)


@dataclass(frozen=True)
class Candidate:
    layout: Layout
    replicas: int
    model: str

    @property
    def gpus(self) -> int:
        return self.layout.gpus * self.replicas

    def key(self, req: PlanRequest) -> str:
        """Journal id: everything the probe's answer depends on."""
        data = {
            "model": self.model, "gpu": self.layout.gpu, "spec": self.layout.spec,
            "replicas": self.replicas, "input": req.input.model_dump(mode="json"),
            "output": req.output.model_dump(mode="json"), "slo": req.slo.model_dump(mode="json"),
            "rate": req.rate_req_s, "users": req.users, "probe": req.probe.model_dump(mode="json"),
            "prefix": req.prefix_cache_fraction,
        }  # fmt: skip
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:20]


def probe_scenario(c: Candidate, req: PlanRequest, window_lifetimes: float) -> Scenario:
    """One copy of the candidate at its share of the load."""
    life, p = req.lifetime_s, req.probe
    warmup = p.warmup_lifetimes * life
    window = window_lifetimes * life
    lengths = {"input": req.input.model_dump(mode="json"),
               "output": req.output.model_dump(mode="json"),
               "prefix_cache_fraction": req.prefix_cache_fraction}  # fmt: skip
    if req.rate_req_s is not None:
        rate = req.rate_req_s / c.replicas
        window = max(window, 30 / rate)  # at least ~30 arrivals in the window
        workload: dict[str, Any] = {"kind": "poisson", "rate_req_s": rate, **lengths}
    else:
        users = math.ceil((req.users or 1) / c.replicas)
        workload = {"kind": "closed", "concurrency": users, "ramp_s": min(warmup, 10.0), **lengths}
    return Scenario.model_validate({
        "name": f"plan_{c.layout.label}", "model": c.model, "gpu": c.layout.gpu,
        "deployments": [{**c.layout.spec, "name": "candidate"}], "workload": workload,
        "slo": req.slo.model_dump(mode="json"),
        "run": {"duration_s": warmup + window, "warmup_s": warmup, "seed": p.seed},
    })  # fmt: skip


def _tight(d: DeploymentResults, ci_rel: float) -> bool:
    ci = d.output_tok_s_per_gpu_ci95
    return ci is not None and d.output_tok_s_per_gpu > 0 and ci <= ci_rel * d.output_tok_s_per_gpu


def _clear_miss(d: DeploymentResults, req: PlanRequest) -> bool:
    """A verdict a longer window will not turn: a latency past 1.5x its target (more
    requests only add to a queue that is already too long)."""
    far = 1.5
    ttft, tpot = d.ttft_at_slo_s, d.tpot_at_slo_s
    return (ttft is None or ttft > far * req.slo.ttft_s) or (
        tpot is None or tpot > far * req.slo.tpot_s
    )


def _row(c: Candidate, req: PlanRequest, d: DeploymentResults | None, error: str | None,
         window: float, sim_s: float) -> dict[str, Any]:  # fmt: skip
    base = {
        "gpu": c.layout.gpu, "kind": c.layout.kind, "layout": c.layout.label,
        "spec": c.layout.spec, "replicas": c.replicas, "gpus": c.gpus,
        "gpus_per_copy": c.layout.gpus, "simulated_s": sim_s,
        "window_lifetimes": window,
    }  # fmt: skip
    if d is None:
        return {**base, "status": "failed", "reason": error, "slo_met": False}
    rate = (req.rate_req_s or 0) / c.replicas
    ok = meets_slo(d, rate, req.slo) if req.rate_req_s is not None else d.slo_met
    tpot = d.tpot_s.mean
    return {
        **base, "status": "simulated", "reason": None if ok else _missed(d, req),
        "slo_met": ok, "near_miss": not ok and _near_miss(d, req),
        "output_tok_s_per_gpu": d.output_tok_s_per_gpu,
        "output_tok_s_per_gpu_ci95": d.output_tok_s_per_gpu_ci95,
        "tok_s_per_user": 1.0 / tpot if tpot else None,
        "ttft_s": d.ttft_at_slo_s, "tpot_s": d.tpot_at_slo_s,
        "request_throughput_req_s": d.request_throughput_req_s * c.replicas,
        "output_tok_s": d.output_tok_s * c.replicas,
        "kv_transfer_s_mean": d.kv_transfer_s_mean,
        "queued": d.requests.queued, "rejected": d.requests.rejected,
    }  # fmt: skip


def _missed(d: DeploymentResults, req: PlanRequest) -> str:
    slo, parts = req.slo, []
    pct = f"p{slo.percentile:g}"
    if d.ttft_at_slo_s is None or d.ttft_at_slo_s > slo.ttft_s:
        parts.append(f"TTFT {pct} {_fmt(d.ttft_at_slo_s)} s > {slo.ttft_s:g} s")
    if d.tpot_at_slo_s is None or d.tpot_at_slo_s > slo.tpot_s:
        parts.append(f"TPOT {pct} {_fmt(d.tpot_at_slo_s, 1e3)} ms > {slo.tpot_s * 1e3:g} ms")
    if d.requests.rejected:
        parts.append(f"{d.requests.rejected} rejected")
    why = ", ".join(parts) or f"backlog: {d.requests.queued} requests still queued"
    return f"near miss: {why}" if _near_miss(d, req) else why


NEAR_MISS = 1.1  # a miss of at most 10% on TTFT and TPOT (no rejections): shown as a near miss


def _near_miss(d: DeploymentResults, req: PlanRequest) -> bool:
    """Whether a candidate that misses the SLO misses it narrowly: every latency within 10% of
    its target, nothing rejected (a queue that still grows past the backlog bound counts, as
    one replica more would absorb it)."""
    ttft, tpot = d.ttft_at_slo_s, d.tpot_at_slo_s
    if ttft is None or tpot is None or d.requests.rejected:
        return False
    return ttft <= NEAR_MISS * req.slo.ttft_s and tpot <= NEAR_MISS * req.slo.tpot_s


def _fmt(v: float | None, scale: float = 1.0) -> str:
    return "-" if v is None else f"{v * scale:.3g}"


def run_candidates(
    candidates: list[Candidate],
    req: PlanRequest,
    backend: Backend,
    journal: Journal | None = None,
    progress: ProgressFn | None = None,
) -> list[dict[str, Any]]:
    """A row per candidate (journalled ones read back, the rest simulated), in input order."""
    rows: dict[int, dict[str, Any]] = {}
    todo = []
    for i, c in enumerate(candidates):
        key = c.key(req)
        if journal is not None and key in journal:
            rows[i] = journal.done[key]
        else:
            todo.append(i)
    window = {i: req.probe.window_lifetimes for i in todo}
    total, done = len(candidates), len(rows)
    while todo:
        jobs = [probe_scenario(candidates[i], req, window[i]) for i in todo]
        again = []
        for j, res in _run(backend, jobs):
            i = todo[j]
            sim_s = jobs[j].run.duration_s or 0.0
            if isinstance(res, str):
                row = _row(candidates[i], req, None, res, window[i], sim_s)
            else:
                d = DeploymentResults.model_validate(res["deployments"][0])
                longer = window[i] * 2 <= req.probe.max_window_lifetimes
                if longer and not _tight(d, req.probe.ci_rel) and not _clear_miss(d, req):
                    window[i] *= 2
                    again.append(i)
                    continue
                row = _row(candidates[i], req, d, None, window[i], sim_s)
            row["id"] = candidates[i].key(req)
            rows[i] = row
            if journal is not None:
                journal.append(row)
            done += 1
            if progress is not None:
                progress(done, total)
        todo = sorted(again)
    return [rows[i] for i in range(len(candidates))]


def _run(backend: Backend, jobs: list[Scenario]) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """Each job's results, or its error message, as they finish: a failing candidate never ends
    the search. After a failure the rest run one by one (a backend stops at its first error)."""
    seen: set[int] = set()
    try:
        for j, res in backend.run(jobs):
            seen.add(j)
            yield j, res
    except (RunError, ValueError):
        for j, sc in enumerate(jobs):
            if j in seen:
                continue
            try:
                yield j, next(iter(backend.run([sc])))[1]
            except (RunError, ValueError) as exc:
                yield j, str(exc)
