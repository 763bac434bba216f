"""What a capacity search reports: the JSON of `mlasim capacity --json`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sim.specs.base import Spec
from sim.specs.scenario import Slo

Status = Literal["converged", "max_runs", "no_failure", "fails_at_lowest", "error"]


class Probe(Spec):
    """One simulation of one deployment at one arrival rate."""

    rate_req_s: float = Field(description="Offered arrival rate, requests per second.")
    meets_slo: bool = Field(
        description="Met the SLO as `meets_slo` defines it (a PD pool searched alone: its pool's "
        "condition, `sim.search.pd_capacity`)."
    )
    slo_met: bool = Field(description="TTFT and TPOT at the SLO percentile within target.")
    ttft_s: float | None = Field(
        description="TTFT at the SLO percentile, seconds (null unless it is 50, 90 or 99)."
    )
    tpot_s: float | None = Field(
        description="TPOT at the SLO percentile, seconds (null unless it is 50, 90 or 99)."
    )
    output_tok_s_per_gpu: float = Field(description="Output tokens per second per GPU.")
    goodput_req_s: float = Field(
        description="Requests per second that finished in the window within both SLO targets."
    )
    queued: int = Field(description="Requests still waiting for admission at the end.")
    rejected: int = Field(description="Requests rejected (KV could never fit one rank).")
    arrived: int = Field(default=0, description="Requests that arrived in the window.")
    completed: int = Field(default=0, description="Of those, the ones that finished.")


class CapacityResult(Spec):
    """One deployment's capacity: the highest rate meeting the SLO and the GPUs for the target."""

    deployment: str = Field(description="Deployment name.")
    gpus_per_deployment: int = Field(description="GPUs of one copy of the deployment.")
    status: Status = Field(
        description="'converged' (within tolerance), 'max_runs' (bracketed, not converged), "
        "'no_failure' (every probe met: the maximum is a lower bound), 'fails_at_lowest' "
        "(no probe met: no maximum), 'error' (a probe failed on its inputs, e.g. the deployment "
        "does not fit its GPUs: `note` holds the message)."
    )
    note: str = Field(description="The status in words, with what to do about it.")
    max_rate_req_s: float | None = Field(
        description="Highest probed rate meeting the SLO below the lowest failing one."
    )
    failing_rate_req_s: float | None = Field(description="Lowest probed rate missing the SLO.")
    output_tok_s_per_gpu: float | None = Field(description="Output tok/s per GPU at the maximum.")
    ttft_s: float | None = Field(description="TTFT at the SLO percentile at the maximum, s.")
    tpot_s: float | None = Field(description="TPOT at the SLO percentile at the maximum, s.")
    replicas: int | None = Field(
        description="Copies of the deployment for the target: ceil(target / maximum)."
    )
    gpus: int | None = Field(description="GPUs for the target: replicas x GPUs per deployment.")
    runs: int = Field(description="Simulations this deployment's search used.")
    probes: list[Probe] = Field(description="Every probe, by rate.")
    warnings: list[str] = Field(
        default_factory=list,
        description="Cautions on the answer, e.g. a near miss: the SLO already nearly missed at "
        "the lowest rate probed, so the maximum rests on a margin run-to-run noise can cross.",
    )


class PdPoolsResult(Spec):
    """A PD deployment sized pool by pool: each pool searched alone as a standalone deployment
    (its replicas as written are one pool unit), then units of each for the target rate."""

    deployment: str = Field(description="Name of the PD deployment.")
    kv_transfer_s: float = Field(
        description="KV transfer of a typical request (mean prompt) on an idle link, seconds."
    )
    prefill_ttft_budget_s: float = Field(
        description="TTFT the prefill pool alone must meet: the SLO's TTFT less kv_transfer_s."
    )
    prefill: CapacityResult = Field(
        description="The prefill pool alone (role prefill); `replicas` are prefill pool units."
    )
    decode: CapacityResult = Field(
        description="The decode pool alone (role decode); `replicas` are decode pool units."
    )
    gpus: int | None = Field(
        description="Prefill GPUs + decode GPUs for the target (null when a pool has no maximum)."
    )


class CapacityReport(Spec):
    """A capacity search over every deployment of a scenario."""

    scenario: str = Field(description="Scenario name.")
    target_rate_req_s: float = Field(description="Arrival rate to provision for, req/s.")
    slo: Slo = Field(description="The SLO each probe is judged against.")
    tolerance: float = Field(description="Relative width at which a bracket counts as converged.")
    max_runs: int = Field(description="Most simulations per deployment.")
    duration_s: float | None = Field(description="Simulated time of each probe, seconds.")
    deployments: list[CapacityResult] = Field(description="Per deployment, scenario order.")
    pd_pools: list[PdPoolsResult] = Field(
        default_factory=list,
        description="Per PD deployment, scenario order: its pools sized separately (empty when "
        "the scenario has none or the pool search is off).",
    )
