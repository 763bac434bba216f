"""A PD deployment's capacity pool by pool: prefill and decode units for a target rate.

The two pools of a PD pair saturate at different rates, so each is searched alone, as a
standalone deployment with the pool's role, its replicas as written being one *pool unit*, on
the scenario's own workload and run. Then for a target rate R: units = ceil(R / pool maximum),
GPUs = units x GPUs of one pool unit, and the prefill : decode GPU ratio follows.

What each pool alone must meet (its *condition*, in place of `capacity.meets_slo`):

- **Prefill pool** (role 'prefill': requests end with their first token). The user sees the
  first token only after the request's KV has crossed to the decode pool, which streams the
  reply, so the pool gets the SLO's TTFT less the KV transfer of a typical request:
  `transfer_s = (mean prompt tokens + per-request state tokens) x KV bytes per token /
  bandwidth`, with the bytes of one copy of a token over every cached layer (what
  `sim.engine.pd.KvTransfer` moves) and the pair's `kv_transfer_gb_s`, else the GPU's NIC (as
  `sim.engine.cluster` builds the link), on an idle link. It meets when TTFT at the SLO
  percentile is within that budget, no request was rejected, and at most one budget's arrivals
  (rate x budget) still wait for admission at the end.
- **Decode pool** (role 'decode': requests arrive with their prompt's KV in place). It meets
  when TPOT at the SLO percentile is within target (at least one request completed), no request
  was rejected, and at most rate x the SLO's TTFT still wait at the end (the whole pair's
  backlog bound, so a growing decode queue fails here as it fails the pair). TTFT is not
  judged: a PD request's first token comes from the prefill pool; a standalone decode pool's
  "first token" is its wait for a decode slot plus one step, which in a pair is a pause after
  the first token, bounded by the backlog rule rather than by the TTFT target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from sim.catalog import load_gpu, load_model
from sim.cost.memory import (
    kv_bytes_per_token,
    kv_bytes_per_token_per_gpu,
    state_bytes_per_request_per_gpu,
)
from sim.engine.lengths import Dist, sample_lengths
from sim.metrics.results import DeploymentResults
from sim.search.capacity_report import CapacityResult, PdPoolsResult, Probe
from sim.specs.deployment import Deployment, PdDeployment
from sim.specs.scenario import Scenario
from sim.specs.workload import EmpiricalLength, FixedLength, TraceWorkload, UniformLength

PoolRole = Literal["prefill", "decode"]
POOLS: tuple[PoolRole, PoolRole] = ("prefill", "decode")
LOGNORMAL_DRAWS = 1 << 16  # rounding and clipping move a lognormal's mean: estimate it by draws


def mean_tokens(dist: Dist) -> float:
    """Mean of a length distribution: exact for fixed, uniform and empirical; a lognormal's
    (rounded, clipped) from a fixed-seed sample of the engine's own sampler."""
    if isinstance(dist, FixedLength):
        return float(dist.tokens)
    if isinstance(dist, UniformLength):
        return (dist.min_tokens + dist.max_tokens) / 2.0
    if isinstance(dist, EmpiricalLength):
        w = np.ones(len(dist.values)) if dist.weights is None else np.asarray(dist.weights)
        # a sum, not np.dot: BLAS kernels differ between CPUs in the last bit
        return float((np.asarray(dist.values, dtype=np.float64) * w).sum() / w.sum())
    rng = np.random.default_rng(0)
    return float(sample_lengths(dist, rng, LOGNORMAL_DRAWS).mean())


def kv_transfer_s(scenario: Scenario, pd: PdDeployment) -> float:
    """Seconds the KV of a typical request (the workload's mean prompt) takes from the prefill
    pool to the decode pool on an idle link; the rule is in the module docstring."""
    workload = scenario.workload
    if isinstance(workload, TraceWorkload):  # no length distribution to average
        raise ValueError("the PD pool search needs a generated workload, not a trace")
    model, gpu, d = load_model(scenario.model), load_gpu(scenario.gpu), pd.prefill
    state = state_bytes_per_request_per_gpu(model, d)
    state_tokens = math.ceil(state / kv_bytes_per_token_per_gpu(model, d)) if state else 0
    tokens = mean_tokens(workload.input) + state_tokens
    return tokens * kv_bytes_per_token(model, d) / ((pd.kv_transfer_gb_s or gpu.nic_gb_s) * 1e9)


def pool_deployment(pd: PdDeployment, pool: PoolRole) -> Deployment:
    """One pool of `pd` as a standalone deployment named `<pd>_<pool>` with the pool's role."""
    data = getattr(pd, pool).model_dump(mode="json") | {"name": f"{pd.name}_{pool}", "role": pool}
    return Deployment.model_validate(data)


@dataclass(frozen=True)
class PoolRule:
    """How one pool of one PD deployment is probed and judged when searched alone."""

    scenario: Scenario  # the scenario searched (the pair among its deployments)
    pair: str  # the PD deployment's name
    pool: PoolRole
    kv_transfer_s: float

    @property
    def label(self) -> str:
        """`<pair>.<pool>`: names this search in progress lines (never a deployment name)."""
        return f"{self.pair}.{self.pool}"

    @property
    def unit(self) -> Deployment:
        dep = self.scenario.deployment(self.pair)
        assert isinstance(dep, PdDeployment)
        return pool_deployment(dep, self.pool)

    @property
    def ttft_budget_s(self) -> float:
        """TTFT the pool must meet: the SLO's, less the transfer for the prefill pool."""
        slo = self.scenario.slo.ttft_s
        return slo - self.kv_transfer_s if self.pool == "prefill" else slo

    @property
    def possible(self) -> bool:
        """False when the transfer alone uses up the TTFT target (no rate can meet it)."""
        return self.ttft_budget_s > 0

    def scenario_at(self, rate_req_s: float) -> Scenario:
        """The scenario with the pool alone as its only deployment, at `rate_req_s`."""
        data = self.scenario.model_dump(mode="json")
        data["deployments"] = [self.unit.model_dump(mode="json")]
        data["workload"]["rate_req_s"] = rate_req_s
        data["expect"] = []
        return Scenario.model_validate(data)

    def meets(self, d: DeploymentResults, rate_req_s: float) -> bool:
        """The pool's condition (module docstring) on its standalone results at `rate_req_s`."""
        slo, n = self.scenario.slo, d.requests
        backlog_ok = n.queued <= rate_req_s * self.ttft_budget_s
        if n.rejected or not backlog_ok:
            return False
        if self.pool == "prefill":
            return d.ttft_at_slo_s is not None and d.ttft_at_slo_s <= self.ttft_budget_s
        return n.completed > 0 and (d.tpot_at_slo_s is None or d.tpot_at_slo_s <= slo.tpot_s)

    def missed(self, p: Probe) -> str:
        """What a failing probe of this pool missed, in words."""
        slo = self.scenario.slo
        pct, parts = f"p{slo.percentile:g}", []
        if self.pool == "prefill" and p.ttft_s is not None and p.ttft_s > self.ttft_budget_s:
            parts.append(
                f"TTFT {pct} {p.ttft_s:.3g} s > {self.ttft_budget_s:.4g} s ({slo.ttft_s:g} s "
                f"less {self.kv_transfer_s * 1e3:.3g} ms KV transfer)"
            )
        if self.pool == "decode" and p.tpot_s is not None and p.tpot_s > slo.tpot_s:
            parts.append(f"TPOT {pct} {p.tpot_s * 1e3:.3g} ms > {slo.tpot_s * 1e3:g} ms")
        if p.queued > p.rate_req_s * self.ttft_budget_s:
            parts.append(f"{p.queued} requests still queued")
        if p.rejected:
            parts.append(f"{p.rejected} rejected")
        return ", ".join(parts) or "the pool's condition (no request completed)"

    def impossible(self) -> CapacityResult:
        """The result of a pool no rate can serve, reported without a simulation."""
        slo = self.scenario.slo
        return CapacityResult(
            deployment=self.label, gpus_per_deployment=self.unit.total_gpus,
            status="fails_at_lowest",
            note=f"the KV transfer of a typical request ({self.kv_transfer_s:.3g} s) uses up the "
            f"TTFT target ({slo.ttft_s:g} s): no prefill rate can meet it; raise the pair's "
            "kv_transfer_gb_s or slo.ttft_s",
            max_rate_req_s=None, failing_rate_req_s=None, output_tok_s_per_gpu=None,
            ttft_s=None, tpot_s=None, replicas=None, gpus=None, runs=0, probes=[],
        )  # fmt: skip


def pool_rules(scenario: Scenario) -> list[PoolRule]:
    """Prefill then decode rule of every PD deployment, in scenario order."""
    rules = []
    for dep in scenario.deployments:
        if isinstance(dep, PdDeployment):
            xfer = kv_transfer_s(scenario, dep)
            rules += [PoolRule(scenario, dep.name, pool, xfer) for pool in POOLS]
    return rules


def pd_pools_results(
    rules: list[PoolRule], results: dict[str, CapacityResult]
) -> list[PdPoolsResult]:
    """One `PdPoolsResult` per pair from its pools' results (keyed by `PoolRule.label`)."""
    out = []
    for pre, dec in zip(rules[::2], rules[1::2], strict=True):
        p, d = results[pre.label], results[dec.label]
        out.append(
            PdPoolsResult(
                deployment=pre.pair,
                kv_transfer_s=pre.kv_transfer_s,
                prefill_ttft_budget_s=pre.ttft_budget_s,
                prefill=p,
                decode=d,
                gpus=p.gpus + d.gpus if p.gpus is not None and d.gpus is not None else None,
            )
        )
    return out
