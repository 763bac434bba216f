"""Analytic pruning: what cannot fit, cannot be laid out, or cannot meet the SLO at any load.

Bounds come from the simulator's own cost model (`ServingCostModel.step_cost`, the calibrated
op times a run would use), priced for the most favourable steps a run could see:

- TPOT floor: one decode request per rank at the prompt's length, divided by the tokens an MTP
  verify step yields on average. Above the TPOT target: no load can meet the SLO.
- TTFT floor: the prompt prefilled alone on one rank, chunk after chunk. Above the TTFT target:
  no load meets it.
- Rate bound: decode at the largest batch per rank whose step still meets TPOT (capped by max
  running requests and by the KV a rank holds), and prefill at whole chunks, time-shared for a
  colocated unit, pool by pool for a PD slice. A real run only does worse (lock-step imbalance,
  prefill interrupting decode, queueing), so fewer replicas than `target / bound` cannot serve
  the target, and the fewest replicas tried is that.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sim.cost.batch import BatchShape
from sim.cost.serving import ServingCostModel
from sim.plan.space import Layout
from sim.plan.spec import PlanRequest
from sim.specs.deployment import Deployment, PdDeployment
from sim.specs.gpu import GpuSpec
from sim.specs.model import ModelSpec
from sim.specs.profile import Profile
from sim.specs.scenario import check_deployment

LOAD_STEPS = (1.0, 1.25, 1.6, 2.0, 2.5, 3.2, 4.0, 5.0, 6.4, 8.0, 10.0, 12.5)
RULES = ("layout", "memory", "latency floor", "max GPUs")


@dataclass(frozen=True)
class Bound:
    """A layout's floors and rate (or users) bound per copy."""

    tpot_floor_s: float
    ttft_floor_s: float
    rate_req_s: float  # most requests/s one copy could serve within TPOT
    users: int  # most requests one copy holds at once


@dataclass
class Pruned:
    """Layouts kept with their replica counts, and what each rule removed (in candidates)."""

    kept: list[tuple[Layout, list[int], Bound]] = field(default_factory=list)
    removed: Counter[str] = field(default_factory=Counter)
    reasons: list[dict[str, Any]] = field(default_factory=list)  # one row per removed layout


def tokens_per_step(d: Deployment) -> float:
    """Expected tokens a decode step yields: 1 + a + a*a2 + ... over the draft positions."""
    out, p = 1.0, 1.0
    for a in d.mtp_probs:
        p *= a
        out += p
    return out


def _decode_s(cost: ServingCostModel, ranks: int, batch: int, context: int, s: int) -> float:
    n = ranks * batch
    shape = BatchShape(
        num_ranks=ranks,
        rank=np.repeat(np.arange(ranks), batch),
        new_tokens=np.full(n, s, dtype=np.int64),
        kv_tokens=np.full(n, context + s, dtype=np.int64),
        is_decode=np.ones(n, dtype=bool),
    )
    return cost.step_cost(shape).duration_s


def _prefill_s(cost: ServingCostModel, ranks: int, new: int, kv: int) -> float:
    one = np.zeros(1, dtype=np.int64)
    shape = BatchShape(
        num_ranks=ranks, rank=one, new_tokens=one + new, kv_tokens=one + kv,
        is_decode=np.zeros(1, dtype=bool),
    )  # fmt: skip
    return cost.step_cost(shape).duration_s


def _pool_bound(cost: ServingCostModel, d: Deployment, req: PlanRequest) -> tuple[float, ...]:
    """(TPOT floor, TTFT floor, decode tok/s, prefill tok/s, users) of one unit of `d`."""
    isl = max(int(req.mean_input_tokens * (1 - req.prefix_cache_fraction)), 1)
    ctx = int(req.mean_input_tokens + req.mean_output_tokens / 2)
    ranks, s, e = d.attn_dp, 1 + d.mtp_draft_tokens, tokens_per_step(d)
    tpot_floor = _decode_s(cost, ranks, 1, int(req.mean_input_tokens), s) / e
    chunk, t_ttft, done = d.chunked_prefill_tokens, 0.0, 0
    while done < isl:
        step = min(chunk, isl - done)
        done += step
        t_ttft += _prefill_s(cost, ranks, step, done)
    kv_users = cost.kv_capacity_tokens_per_rank // max(ctx + req.mean_output_tokens // 2, 1)
    cap = max(min(d.max_running_requests, int(kv_users)), 1)
    best = 0.0
    for b in sorted({min(2**i, cap) for i in range(12)} | {cap}):
        t = _decode_s(cost, ranks, b, ctx, s)
        if t / e <= req.slo.tpot_s:
            best = max(best, ranks * b * e / t)
    full = min(chunk, isl)
    prefill = ranks * full / _prefill_s(cost, 1, full, full)  # every rank prefilling whole chunks
    return tpot_floor, t_ttft, best, prefill, ranks * cap


def layout_bound(
    layout: Layout, req: PlanRequest, model: ModelSpec, gpu: GpuSpec, profile: Profile | None
) -> Bound:
    """The layout's bound; ValueError (the cost model's message) when it cannot be built."""
    osl, isl = req.mean_output_tokens, req.mean_input_tokens
    if layout.kind == "unit":
        d = Deployment.model_validate(layout.spec)
        check_deployment(model, d)
        tf, pf, dec, pre, users = _pool_bound(_cost(model, gpu, d, profile), d, req)
        rate = 1.0 / (osl / dec + isl / pre) if dec > 0 else 0.0
        return Bound(tf, pf, rate, int(users))
    pd = PdDeployment.model_validate(layout.spec)
    for pool in (pd.prefill, pd.decode):
        check_deployment(model, pool)
    p = _pool_bound(_cost(model, gpu, pd.prefill, profile), pd.prefill, req)
    q = _pool_bound(_cost(model, gpu, pd.decode, profile), pd.decode, req)
    rate = min(pd.prefill.replicas * p[3] / isl, pd.decode.replicas * q[2] / osl)
    return Bound(q[0], p[1], rate, pd.decode.replicas * int(q[4]))  # (floats of _pool_bound)


def _cost(model: ModelSpec, gpu: GpuSpec, d: Deployment, profile: Profile | None) -> Any:
    from sim.run import default_cost_factory

    return default_cost_factory(model, gpu, d, profile)


def replica_counts(bound: Bound, req: PlanRequest, gpus: int) -> tuple[list[int], int]:
    """(replica counts to simulate, the fewest the bound allows)."""
    if req.rate_req_s is not None:
        need = req.rate_req_s / bound.rate_req_s if bound.rate_req_s > 0 else math.inf
    else:
        need = (req.users or 1) / max(bound.users, 1)
    if not math.isfinite(need):
        return [], 0
    low = max(math.ceil(need - 1e-9), 1)
    counts = sorted({max(math.ceil(low * f - 1e-9), 1) for f in LOAD_STEPS})
    counts = counts[: req.space.loads]
    if req.max_gpus is not None:
        counts = [k for k in counts if k * gpus <= req.max_gpus]
    return counts, low


def prune(
    layouts: list[Layout],
    req: PlanRequest,
    models: dict[str, tuple[ModelSpec, GpuSpec, Profile | None]],
) -> Pruned:
    """Apply every rule to every layout (`models` maps GPU name to model, GPU and profile);
    a removed layout counts `space.loads` candidates against its rule."""
    out = Pruned()
    n = req.space.loads
    for lay in layouts:
        model, gpu, profile = models[lay.gpu]
        rule, why = _check(lay, req, model, gpu, profile)
        if rule is None:
            bound = why
            counts, low = replica_counts(bound, req, lay.gpus)
            if counts:
                out.kept.append((lay, counts, bound))
                out.removed["max GPUs"] += n - len(counts)
                continue
            rule = "max GPUs"
            why = (f"needs at least {low} copies of {lay.gpus} GPUs by the roofline bound, over "
                   f"--max-gpus {req.max_gpus}")  # fmt: skip
        out.removed[rule] += n
        out.reasons.append({"gpu": lay.gpu, "layout": lay.label, "rule": rule, "reason": why})
    return out


# layouts are tried at mem_fraction 0.9 (the Deployment default, vLLM's gpu_memory_utilization
# default); one pruned for memory that would fit at 0.95 or below is a near miss, a setting a
# deployment can raise that far; above it, only more GPUs or smaller weights help
NEAR_MISS_MEM_FRACTION = 0.95


def memory_need(lay: Layout, model: ModelSpec, gpu: GpuSpec) -> float | None:
    """Share of one GPU's HBM the layout needs (weights + activations + one chunk of KV; the
    tighter pool of a PD slice), or None when the layout itself is invalid."""
    from sim.cost.activations import activation_reserve_bytes
    from sim.cost.memory import kv_bytes_per_token_per_gpu, weight_bytes_per_gpu

    try:
        if lay.kind == "unit":
            pools = [Deployment.model_validate(lay.spec)]
        else:
            pd = PdDeployment.model_validate(lay.spec)
            pools = [pd.prefill, pd.decode]
        need = [
            weight_bytes_per_gpu(model, d)
            + activation_reserve_bytes(model, d)
            + d.chunked_prefill_tokens * kv_bytes_per_token_per_gpu(model, d)
            for d in pools
        ]
    except ValueError:
        return None
    return max(need) / gpu.hbm_bytes


def _check(
    lay: Layout, req: PlanRequest, model: ModelSpec, gpu: GpuSpec, profile: Profile | None
) -> tuple[str | None, Any]:
    """(None, bound) for a layout that stays, else (rule, reason)."""
    from pydantic import ValidationError

    from sim.specs.base import error_lines

    try:
        bound = layout_bound(lay, req, model, gpu, profile)
    except ValidationError as exc:
        return "layout", "; ".join(error_lines(exc))
    except ValueError as exc:
        msg = str(exc)
        if "does not fit" not in msg:
            return "layout", msg
        need = memory_need(lay, model, gpu)
        if need is not None and need <= NEAR_MISS_MEM_FRACTION:
            msg = (f"near miss: needs {need:.0%} of HBM, within reach of mem_fraction "
                   f"{math.ceil(need * 100) / 100:.2f}; {msg}")  # fmt: skip
        return "memory", msg
    slo = req.slo
    if bound.tpot_floor_s > slo.tpot_s:
        return "latency floor", (
            f"one request per rank already takes {bound.tpot_floor_s * 1e3:.3g} ms per token "
            f"> TPOT {slo.tpot_s * 1e3:g} ms"
        )
    if bound.ttft_floor_s > slo.ttft_s:
        return "latency floor", (
            f"the prompt alone takes {bound.ttft_floor_s:.3g} s to prefill > TTFT {slo.ttft_s:g} s"
        )
    return None, bound
