"""What a run reports, per deployment: the JSON contract of `mlasim run --json`.

Every rate is measured over the window [warmup_s, end_s] of simulated time; latencies are over
the requests that arrived in the window: TTFT over those that got a first token, with those
still waiting at the end counted as at least their wait (Kaplan-Meier percentiles); E2E over
those that completed, the unfinished ones likewise; TPOT over those that completed. For a PD
deployment the top-level step, batch and KV figures are the decode pool's; `pools` has each
pool's own.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from sim.metrics.benchmark import BenchmarkResults
from sim.metrics.stats import Percentiles, paired_ratio_ci95
from sim.specs.base import Spec

# Below this share of the window's requests finished, TPOT and an SLO verdict rest on the
# earliest or shortest. A closed loop in steady state keeps its users running, so its share is
# completed / (completed + users): a third means the window saw half a turnover of the users.
FEW_FINISHED = 1 / 3


def few_finished(arrived: int, completed: int) -> bool:
    """Whether too few of the window's requests finished for their latencies to stand for all."""
    return arrived > 0 and completed < FEW_FINISHED * arrived


class RequestCountsOut(Spec):
    """Requests that arrived in the window, by where they are at the end."""

    arrived: int = Field(description="Requests that arrived at or after the warm-up.")
    completed: int = Field(description="Of those, completed by the end.")
    running: int = Field(description="Of those, prefilling, decoding or in KV transfer.")
    queued: int = Field(description="Of those, waiting for admission on a rank.")
    rejected: int = Field(description="Of those, rejected: their KV could never fit one rank.")


LAUNCH_SOURCE = (
    "The per-kernel figure of step_breakdown_s's 'kernel_launch' row (the launches of the "
    "kernels no table covers, priced by the roofline; a table's kernels keep theirs inside "
    "their measured time), in microseconds, and where it comes from; null where no kernel "
    "pays one."
)


class PoolResults(Spec):
    """One pool (a colocated deployment has one; PD has 'prefill' and 'decode')."""

    name: str = Field(description="Pool name.")
    role: str = Field(description="'colocated', 'prefill' or 'decode'.")
    gpus: int = Field(description="GPUs in the pool, all replicas.")
    units: int = Field(description="Lock-step units (replicas).")
    ranks_per_unit: int = Field(description="Attention ranks per unit (attention DP).")
    steps: int = Field(description="Steps run in the window, all units.")
    step_time_s: float | None = Field(description="Mean step duration, seconds.")
    busy_fraction: float = Field(description="Share of the window the units spent stepping.")
    batch_per_rank: float | None = Field(description="Mean request segments per rank per step.")
    decode_batch_per_rank: float | None = Field(description="Mean decode requests per rank.")
    prefill_tokens_per_step: float | None = Field(description="Mean prefill tokens per step.")
    dp_imbalance: float | None = Field(
        description="Mean over steps of the slowest rank's own time over the mean across the "
        "unit's ranks (all of a rank's own work: attention, projections, router, shared experts, "
        "dense MLP and head where they are the rank's own, memory-bound kernels, TP all-reduce, "
        "MTP draft; idle ranks count 0)."
    )
    kv_utilisation: float | None = Field(description="Mean share of KV pages in use per step.")
    kv_utilisation_peak: float = Field(description="Highest share of one rank's KV pages used.")
    kv_capacity_tokens_per_rank: int = Field(description="KV tokens one attention rank holds.")
    kv_capacity_tokens_per_gpu: int | None = Field(description="KV tokens one GPU holds.")
    kv_dup_factor: float | None = Field(description="Copies of each cached token in a rank.")
    kv_bytes_per_token_per_gpu: float | None = Field(description="Bytes a token takes per GPU.")
    step_breakdown_s: dict[str, float] = Field(description="Mean seconds per step, by op.")
    step_sources: dict[str, str] = Field(description="Source of each op's time.")
    extrapolated_ops: list[str] = Field(
        description="Ops priced outside measured grids or from another GPU's tables; sorted."
    )
    overlap_saved_s: float | None = Field(
        description="Mean seconds per step that work run concurrently hid (overlap_row says "
        "which: two-batch overlap, or an engine's second stream)."
    )
    overlap_row: str | None = Field(
        default=None,
        description="What overlap_saved_s is: 'two_batch_overlap' (steps split in two "
        "micro-batches) or 'shared_experts_stream' (a graph-replayed decode running the "
        "shared experts beside the routed side on a second stream); null where neither applies.",
    )
    overlap_source: str | None = Field(
        default=None, description="Where overlap_row's mechanism comes from."
    )
    launch_source: str | None = Field(default=None, description=LAUNCH_SOURCE)
    mtp_accept_len: float | None = Field(description="Mean tokens per decode verify step.")
    preemptions: int = Field(description="Recompute preemptions in the whole run.")


# The figures a deployment reports as its main pool's (the decode pool of a PD pair, the only
# pool otherwise): the same names, types and meaning in both classes.
FROM_MAIN_POOL = (
    "kv_dup_factor", "kv_bytes_per_token_per_gpu", "kv_capacity_tokens_per_gpu",
    "kv_capacity_tokens_per_rank", "kv_utilisation", "batch_per_rank", "decode_batch_per_rank",
    "dp_imbalance", "step_time_s", "step_breakdown_s", "overlap_saved_s", "overlap_row",
    "overlap_source", "launch_source", "step_sources", "extrapolated_ops", "mtp_accept_len",
)  # fmt: skip


class DeploymentResults(Spec):
    """One deployment's results (the `deployments[]` entries of the JSON contract)."""

    name: str = Field(description="Deployment name.")
    kind: str = Field(description="'unit' (one colocated or single-role layout) or 'pd'.")
    gpus: int = Field(description="GPUs, all pools and replicas.")
    nodes: float = Field(description="Nodes (GPUs / GPUs per node).")
    output_tok_s: float = Field(description="Output tokens per second, total.")
    output_tok_s_per_gpu: float = Field(description="Output tokens per second per GPU.")
    output_tok_s_per_gpu_ci95: float | None = Field(
        default=None,
        description="Half-width of a 95% confidence interval of output_tok_s_per_gpu from ten "
        "batch means over the window: how much the figure depends on where the window falls "
        "(null when a tenth of the window saw no step).",
    )
    output_tok_s_per_gpu_batches: list[float] | None = Field(
        default=None,
        description="output_tok_s_per_gpu in each tenth of the window (the batch means behind "
        "the interval). Deployments of one scenario compare part by part: under an open-loop or "
        "trace workload with run.duration_s they see the same requests at the same times; a "
        "closed loop shares only the request lengths, and without duration_s the parts differ.",
    )
    output_tok_s_per_node: float = Field(description="Output tokens per second per node.")
    input_tok_s: float = Field(
        description="Whole prompts (cached prefix included) per second of the requests whose "
        "first token came in the window (in PD, when the decode pool streamed it)."
    )
    input_tok_s_per_gpu: float = Field(description="Prompt tokens per second per GPU.")
    input_tok_s_per_node: float = Field(description="Prompt tokens per second per node.")
    request_throughput_req_s: float = Field(description="Completed requests per second.")
    ttft_s: Percentiles = Field(description="Time to first token.")
    tpot_s: Percentiles = Field(description="Time per output token after the first.")
    itl_s: Percentiles = Field(
        description="Time between successive token deliveries, per delivery: an MTP step "
        "delivering several tokens at once is one gap, so with MTP it exceeds TPOT."
    )
    e2e_s: Percentiles = Field(description="Arrival to last token.")
    goodput_req_s: float = Field(
        description="Requests per second that finished in the window within both SLO targets "
        "(the population of request_throughput_req_s)."
    )
    slo_attainment: float | None = Field(
        description="Share of post-warm-up arrivals whose SLO outcome is known that met it: "
        "finished within both targets, against finished outside one, rejected, first token late, "
        "or still waiting past the TTFT target at the end (requests in flight within both "
        "targets are undecided and left out)."
    )
    slo_met: bool = Field(
        description="TTFT and TPOT at the SLO percentile are within target (TTFT counting "
        "requests still waiting at the end; TPOT over completed requests, so a run where none "
        "completed does not meet it)."
    )
    ttft_at_slo_s: float | None = Field(description="TTFT at the SLO percentile, seconds.")
    tpot_at_slo_s: float | None = Field(description="TPOT at the SLO percentile, seconds.")
    requests: RequestCountsOut = Field(description="Request counts for the window.")
    kv_dup_factor: float | None = Field(description="KV duplication factor (attention TP).")
    kv_bytes_per_token_per_gpu: float | None = Field(description="KV bytes per token per GPU.")
    kv_capacity_tokens_per_gpu: int | None = Field(description="KV tokens one GPU holds.")
    kv_capacity_tokens_per_rank: int = Field(description="KV tokens one attention rank holds.")
    kv_capacity_tokens_total: int = Field(
        description="Distinct KV tokens all attention ranks hold together (decode pool for PD)."
    )
    kv_utilisation: float | None = Field(description="Mean share of KV pages in use.")
    batch_per_rank: float | None = Field(description="Mean request segments per rank per step.")
    decode_batch_per_rank: float | None = Field(description="Mean decode requests per rank.")
    dp_imbalance: float | None = Field(
        description="Mean over steps of the slowest rank's own time (all its own work, not "
        "attention alone) over the mean across ranks, idle ranks counting 0."
    )
    step_time_s: float | None = Field(description="Mean step duration, seconds.")
    step_breakdown_s: dict[str, float] = Field(description="Mean seconds per step, by op.")
    overlap_saved_s: float | None = Field(
        default=None,
        description="Mean seconds per step that work run concurrently hid (overlap_row says "
        "which; negative: splitting in two micro-batches cost more than it hid); the ops of "
        "step_breakdown_s add up to step_time_s plus this.",
    )
    overlap_row: str | None = Field(
        default=None,
        description="What overlap_saved_s is: 'two_batch_overlap' or 'shared_experts_stream' "
        "(as in pools[]); null where neither applies.",
    )
    overlap_source: str | None = Field(
        default=None, description="Where overlap_row's mechanism comes from."
    )
    launch_source: str | None = Field(default=None, description=LAUNCH_SOURCE)
    step_sources: dict[str, str] = Field(description="Source of each op's time.")
    extrapolated_ops: list[str] = Field(
        description="Ops whose time was estimated outside a measured grid, or from a table "
        "measured on another GPU (held efficiency, scaled by roofline); sorted."
    )
    mtp_accept_len: float | None = Field(description="Mean tokens per decode verify step.")
    preemptions: int = Field(
        description="Recompute preemptions of the requests that arrived after the warm-up."
    )
    kv_transfer_s_mean: float | None = Field(description="PD: mean KV transfer time, seconds.")
    pools: list[PoolResults] = Field(description="Per-pool details.")
    profile: str = Field(description="Calibration profile the cost model used.")
    window_s: float = Field(description="Length of the measurement window, seconds.")
    sim_events: int = Field(description="simpy events processed.")
    benchmark: BenchmarkResults | None = Field(
        default=None,
        description="Under a benchmark workload: the client's own summary (warm-up left out, "
        "TPOT per request, throughput over the benchmark's duration).",
    )


class Results(Spec):
    """A scenario's results: one entry per deployment, in the scenario's order."""

    scenario: str = Field(description="Scenario name.")
    description: str = Field(default="", description="Scenario description.")
    model: str = Field(description="Model name.")
    gpu: str = Field(description="GPU name.")
    warmup_s: float = Field(description="Excluded leading simulated time, seconds.")
    end_s: float = Field(description="Simulated time at the end, seconds (latest deployment).")
    slo_ttft_s: float = Field(description="TTFT target, seconds.")
    slo_tpot_s: float = Field(description="TPOT target, seconds.")
    slo_percentile: float = Field(description="Percentile the targets apply to.")
    deployments: list[DeploymentResults] = Field(description="Per-deployment results.")

    def deployment(self, name: str) -> DeploymentResults:
        for d in self.deployments:
            if d.name == name:
                return d
        raise KeyError(f"no deployment {name!r}: known are {[d.name for d in self.deployments]}")


def throughput_vs(d: DeploymentResults, base: DeploymentResults) -> tuple[float, float] | None:
    """`d`'s tokens per GPU as a multiple of `base`'s, and the half-width of its 95% interval
    from the paired tenths of the window (matched under an open-loop or trace workload with
    `run.duration_s`, where both see the same requests at the same times; less so under a
    closed loop or without `duration_s`); None when either lacks the parts."""
    a, b = d.output_tok_s_per_gpu_batches, base.output_tok_s_per_gpu_batches
    if a is None or b is None:
        return None
    return paired_ratio_ci95(np.array(a), np.array(b))
