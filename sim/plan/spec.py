"""What a plan asks: model, GPU types, traffic, SLO, load target, and the layouts to search.

`PlanRequest` is what `mlasim plan` builds from its options and what a scenario file's `plan:`
block holds; `PlanSpace` lists the values each knob may take. Defaults keep the search small
(a couple of minutes on two cores for DeepSeek-V3 on one GPU type); widen any list to search more.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sim.specs.base import Spec
from sim.specs.deployment import DType, EngineName, WeightDType
from sim.specs.scenario import Slo
from sim.specs.workload import FixedLength, LengthDist, LognormalLength, UniformLength

# DeepSeek-V3 technical report (arXiv:2412.19437, section 5.4.3): "the acceptance rate of the
# second token prediction ranges between 85% and 90%"; the lower end is the default.
MTP_ACCEPTANCE = 0.85


class PlanSpace(Spec):
    """The values each knob takes; candidates are their product, pruned before simulation."""

    nodes: tuple[int, ...] = Field(default=(1, 2), min_length=1, description="Nodes per unit.")
    attn_tp: tuple[int, ...] = Field(
        default=(1, 8), min_length=1, description="Attention TP sizes (DP = unit GPUs / TP)."
    )
    moe: tuple[Literal["ep", "tp"], ...] = Field(
        default=("ep", "tp"),
        min_length=1,
        description="MoE layout: 'ep' spreads experts over the unit, 'tp' splits every expert "
        "over one node's GPUs (EP over the nodes).",
    )
    placement: tuple[Literal["rank", "unit"], ...] = Field(
        default=("rank",),
        min_length=1,
        description="Dense MLP and output head: 'rank' shards them over attention TP (vLLM; "
        "SGLang --moe-dense-tp-size 1 --enable-dp-lm-head), 'unit' over the whole unit "
        "(SGLang's default). Tried only where attention is data-parallel.",
    )
    mtp_draft_tokens: tuple[int, ...] = Field(
        default=(0, 1), min_length=1, description="MTP draft tokens (models with an MTP module)."
    )
    mtp_acceptance: float = Field(
        default=MTP_ACCEPTANCE, gt=0, le=1, description="Acceptance of each draft token."
    )
    kv_dtype: tuple[DType, ...] = Field(default=("bf16", "fp8"), min_length=1, description="KV.")
    weight_dtype: tuple[WeightDType, ...] = Field(
        default=(),
        description="Weight dtypes; empty: the checkpoint's only. 'fp4' is kept only on GPUs "
        "with FP4 tensor cores (Blackwell).",
    )
    two_batch_overlap: tuple[bool, ...] = Field(
        default=(False,), min_length=1, description="Two-batch overlap (EP layouts only)."
    )
    chunked_prefill_tokens: tuple[int, ...] = Field(
        default=(8192,), min_length=1, description="Prefill token budgets per rank per step."
    )
    max_running_requests: tuple[int, ...] = Field(
        default=(256,), min_length=1, description="Most requests per rank."
    )
    pd: bool = Field(default=True, description="Also try prefill/decode disaggregation.")
    pd_ratios: tuple[tuple[int, int], ...] = Field(
        default=((1, 1), (1, 2), (2, 1)),
        description="Prefill : decode units in one PD slice.",
    )
    loads: int = Field(
        default=3,
        ge=1,
        le=12,
        description="Replica counts tried per layout: the fewest the roofline bound allows, "
        "then 1.25x, 1.6x, 2x, 2.5x, ... that many.",
    )


class ProbeSpec(Spec):
    """How long each candidate is simulated, in request lifetimes (TTFT + output x TPOT target)."""

    warmup_lifetimes: float = Field(default=1.0, gt=0, description="Warm-up, lifetimes.")
    window_lifetimes: float = Field(default=3.0, gt=0, description="First window, lifetimes.")
    max_window_lifetimes: float = Field(
        default=6.0, gt=0, description="Longest window a probe is extended to."
    )
    ci_rel: float = Field(
        default=0.10,
        gt=0,
        lt=1,
        description="A probe stops once the 95% batch-means interval of tok/s per GPU is within "
        "this share of its value; otherwise its window doubles, up to the longest.",
    )
    seed: int = Field(default=0, ge=0, description="Seed of every probe.")


class PlanRequest(Spec):
    """One planning question."""

    model: str = Field(description="Catalog model, config.json path or HuggingFace model folder.")
    gpus: tuple[str, ...] = Field(min_length=1, description="GPU types to plan for.")
    input: LengthDist = Field(description="Prompt length distribution, tokens.")
    output: LengthDist = Field(description="Answer length distribution, tokens.")
    prefix_cache_fraction: float = Field(
        default=0.0, ge=0.0, lt=1.0, description="Share of each prompt already cached."
    )
    slo: Slo = Field(description="TTFT and TPOT targets at a percentile.")
    rate_req_s: float | None = Field(default=None, gt=0, description="Target arrival rate.")
    users: int | None = Field(default=None, ge=1, description="Target concurrent users.")
    max_gpus: int | None = Field(default=None, ge=1, description="Most GPUs in a plan.")
    engine: EngineName | None = Field(default=None, description="Serving engine to mimic.")
    gpu_hour_usd: float | None = Field(
        default=None, gt=0, description="$ per GPU-hour (default: the price table's, per GPU)."
    )
    top: int = Field(default=5, ge=1, description="Rows in the top-K table.")
    simulate_all: bool = Field(
        default=False,
        description="Simulate every candidate that survives the analytic rules; by default one "
        "that costs more than the top K of its kind already meeting the SLO is skipped as "
        "dominated (`sim/plan/order.py`).",
    )
    space: PlanSpace = Field(default_factory=PlanSpace, description="Knob values to search.")
    probe: ProbeSpec = Field(default_factory=ProbeSpec, description="Probe lengths.")

    @model_validator(mode="after")
    def _one_target(self) -> PlanRequest:
        if (self.rate_req_s is None) == (self.users is None):
            raise ValueError(
                "give exactly one load target: rate_req_s (--rate, requests/s) or users "
                "(--users, concurrent requests)"
            )
        return self

    @property
    def mean_output_tokens(self) -> float:
        return mean_length(self.output)

    @property
    def mean_input_tokens(self) -> float:
        return mean_length(self.input)

    @property
    def lifetime_s(self) -> float:
        """A request's life at the SLO's limits: what a probe's warm-up must cover."""
        return self.slo.ttft_s + self.mean_output_tokens * self.slo.tpot_s


def mean_length(dist: LengthDist) -> float:
    """Mean of a length distribution (lognormal: its mean before clipping)."""
    if isinstance(dist, FixedLength):
        return float(dist.tokens)
    if isinstance(dist, UniformLength):
        return (dist.min_tokens + dist.max_tokens) / 2
    if isinstance(dist, LognormalLength):
        return float(dist.mean_tokens)
    w = dist.weights or (1.0,) * len(dist.values)
    return sum(v * x for v, x in zip(dist.values, w, strict=True)) / sum(w)
