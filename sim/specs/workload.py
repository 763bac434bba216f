"""Traffic offered to a deployment: when requests arrive and how long they are.

Every variant is tagged by `kind`; an unknown kind is rejected with the list of known ones.

- Length distributions (`input`, `output`, `prefix_cache_tokens`): fixed, uniform, lognormal,
  empirical.
- Workloads: `poisson` and `gamma` (open loop; gamma's `cv` sets burstiness), `closed` (a fixed
  number of requests in flight, in total or per attention rank, as published benchmarks measure),
  `trace` (replay a CSV `arrival_s,input_tokens,output_tokens[,cached_tokens]`), `benchmark`
  (a serving benchmark client as SGLang's `bench_serving` and `vllm bench serve` run one:
  `num_prompts` requests behind a `max_concurrency` semaphore, warm-up first; see
  docs/serving-overheads.md).
- Prefix-cache hits: each request's first `cached_tokens` are already in the cache, given as a
  fraction of the input or as a length distribution (always capped at input - 1).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from sim.specs.base import FieldError, Spec


def _token_count(v: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> int:
    """A length field's own check, with a message that gives the real minimum and the fix
    (pydantic's '>= 0' is the bound of `prefix_cache_tokens`; input and output need 1)."""
    try:
        n: int = handler(v)
    except ValidationError as exc:
        if exc.errors()[0]["type"] != "greater_than_equal":
            raise
        raise ValueError(
            f"{info.field_name}={v} is negative: lengths are token counts, at least 1 for input "
            f"and output (0 is allowed in prefix_cache_tokens only); write e.g. "
            f"{info.field_name}: 1"
        ) from None
    return n


class FixedLength(Spec):
    """Every request has the same length."""

    kind: Literal["fixed"] = Field(description="Distribution kind.")
    tokens: int = Field(
        ge=0,
        description="Length of every request, tokens (>= 1 for input and output; 0 only in "
        "prefix_cache_tokens).",
    )

    _count = field_validator("tokens", mode="wrap")(_token_count)


class UniformLength(Spec):
    """Integer lengths drawn uniformly from [min_tokens, max_tokens]."""

    kind: Literal["uniform"] = Field(description="Distribution kind.")
    min_tokens: int = Field(ge=0, description="Shortest length, tokens (inclusive).")
    max_tokens: int = Field(ge=0, description="Longest length, tokens (inclusive).")

    _count = field_validator("min_tokens", "max_tokens", mode="wrap")(_token_count)

    @model_validator(mode="after")
    def _ordered(self) -> UniformLength:
        if self.max_tokens < self.min_tokens:
            raise FieldError(
                ("max_tokens",),
                f"max_tokens ({self.max_tokens}) is below min_tokens ({self.min_tokens}); "
                "swap them",
            )
        return self


class LognormalLength(Spec):
    """Lognormal lengths with a given mean, rounded and clipped to [min_tokens, max_tokens]."""

    kind: Literal["lognormal"] = Field(description="Distribution kind.")
    mean_tokens: float = Field(gt=0, description="Mean length before clipping, tokens.")
    sigma: float = Field(gt=0, le=4.0, description="Standard deviation of log(length).")
    min_tokens: int = Field(default=1, ge=0, description="Lengths below are raised to this.")
    max_tokens: int | None = Field(default=None, ge=1, description="Lengths above are cut here.")

    @model_validator(mode="after")
    def _ordered(self) -> LognormalLength:
        if self.max_tokens is not None and self.max_tokens < self.min_tokens:
            raise FieldError(
                ("max_tokens",),
                f"max_tokens ({self.max_tokens}) is below min_tokens ({self.min_tokens}); "
                "raise max_tokens",
            )
        return self


class EmpiricalLength(Spec):
    """Lengths drawn from a list of observed values (optionally weighted)."""

    kind: Literal["empirical"] = Field(description="Distribution kind.")
    values: tuple[int, ...] = Field(min_length=1, description="Observed lengths, tokens.")
    weights: tuple[float, ...] | None = Field(
        default=None, description="Relative weight of each value (default: equal)."
    )

    @model_validator(mode="after")
    def _consistent(self) -> EmpiricalLength:
        if any(v < 0 for v in self.values):
            raise FieldError(("values",), "values are token counts: each must be >= 0")
        if self.weights is not None:
            if len(self.weights) != len(self.values):
                raise FieldError(
                    ("weights",),
                    f"weights has {len(self.weights)} entries for {len(self.values)} values: "
                    "give one weight per value",
                )
            if any(w < 0 for w in self.weights) or sum(self.weights) <= 0:
                raise FieldError(("weights",), "weights must be >= 0 and not all zero")
        return self


LengthDist = Annotated[
    FixedLength | UniformLength | LognormalLength | EmpiricalLength,
    Field(discriminator="kind"),
]
LENGTH_KINDS = ("fixed", "uniform", "lognormal", "empirical")


def length_bounds(dist: FixedLength | UniformLength | LognormalLength | EmpiricalLength) -> int:
    """Smallest length the distribution can produce."""
    if isinstance(dist, FixedLength):
        return dist.tokens
    if isinstance(dist, EmpiricalLength):
        return min(dist.values)
    return dist.min_tokens


def longest_length(
    dist: FixedLength | UniformLength | LognormalLength | EmpiricalLength,
) -> int | None:
    """Longest length the distribution can produce (None: unbounded)."""
    if isinstance(dist, FixedLength):
        return dist.tokens
    if isinstance(dist, EmpiricalLength):
        return max(dist.values)
    return dist.max_tokens


class _Synthetic(Spec):
    """Fields shared by generated workloads: request lengths and prefix-cache hits."""

    input: LengthDist = Field(description="Prompt length distribution, tokens.")
    output: LengthDist = Field(description="Generated length distribution, tokens (>= 1).")
    prefix_cache_fraction: float = Field(
        default=0.0,
        ge=0.0,
        lt=1.0,
        description="Share of each prompt already in the KV cache: those tokens skip prefill. "
        "Each request holds its own pages for them (a prefix shared by many requests is not "
        "stored once), so KV use is an upper bound for shared-prefix traffic.",
    )
    prefix_cache_tokens: LengthDist | None = Field(
        default=None, description="Cached prompt tokens per request (instead of the fraction)."
    )

    @model_validator(mode="after")
    def _lengths(self) -> _Synthetic:
        if length_bounds(self.input) < 1:
            message = "input lengths must be >= 1 token: raise input's smallest value"
            raise FieldError(("input",), message)
        if length_bounds(self.output) < 1:
            message = "output lengths must be >= 1 token: raise output's smallest value"
            raise FieldError(("output",), message)
        if self.prefix_cache_tokens is not None and self.prefix_cache_fraction > 0:
            message = "give prefix_cache_fraction or prefix_cache_tokens, not both: remove one"
            raise FieldError(("prefix_cache_tokens",), message)
        return self


class PoissonWorkload(_Synthetic):
    """Open loop: exponential inter-arrival times at a fixed rate."""

    kind: Literal["poisson"] = Field(description="Workload kind.")
    rate_req_s: float = Field(gt=0, description="Offered load, requests per second.")


class GammaWorkload(_Synthetic):
    """Open loop with bursts: gamma inter-arrival times (cv = 1 is Poisson; larger is burstier)."""

    kind: Literal["gamma"] = Field(description="Workload kind.")
    rate_req_s: float = Field(gt=0, description="Offered load, requests per second.")
    cv: float = Field(gt=0, le=20.0, description="Coefficient of variation of inter-arrivals.")


class ClosedWorkload(_Synthetic):
    """Closed loop: a new request arrives the moment one completes or is refused (it can never
    fit a rank's KV).

    `concurrency_per_rank` keeps that many requests on every attention rank (the replacement goes
    to the rank the finished one started on); `concurrency` keeps that many in total and lets
    the router place them.
    """

    kind: Literal["closed"] = Field(description="Workload kind.")
    concurrency: int | None = Field(default=None, ge=1, description="Requests in flight, total.")
    concurrency_per_rank: int | None = Field(
        default=None, ge=1, description="Requests in flight per attention rank (of the first pool)."
    )
    ramp_s: float = Field(
        default=0.0,
        ge=0.0,
        description="Spread the first requests evenly over this many seconds instead of sending "
        "them all at 0: with fixed lengths, users that start together stay in step (all "
        "prefilling, then all decoding) and results depend on where the window falls.",
    )

    @model_validator(mode="after")
    def _one_of(self) -> ClosedWorkload:
        if (self.concurrency is None) == (self.concurrency_per_rank is None):
            message = "give exactly one of concurrency or concurrency_per_rank"
            raise FieldError(("concurrency",), message)
        return self


class TraceWorkload(Spec):
    """Replay a CSV trace with a header `arrival_s,input_tokens,output_tokens[,cached_tokens]`."""

    kind: Literal["trace"] = Field(description="Workload kind.")
    path: str = Field(description="CSV file; relative paths are relative to the scenario file.")
    time_scale: float = Field(
        default=1.0, gt=0, description="Multiply arrival times by this (0.5 doubles the rate)."
    )


class BenchmarkWorkload(Spec):
    """A serving benchmark client: `warmup_requests` first (all of them finish before the
    benchmark starts), then `num_prompts` requests sent at `request_rate` (inf: all at once)
    through a `max_concurrency` semaphore (a request waits for a free slot; a finished one
    frees it). The run ends when the last prompt is served.

    Lengths are drawn as the clients' random dataset does: `range_convention: sglang`
    (`bench_serving --random-range-ratio`) draws integers uniformly in
    [max(floor(L x ratio), 1), L]; `vllm` (`vllm bench serve`) in
    [floor(L x (1 - ratio)), floor(L x (1 + ratio))].
    """

    kind: Literal["benchmark"] = Field(description="Workload kind.")
    num_prompts: int = Field(ge=1, description="Requests the benchmark sends (--num-prompts).")
    max_concurrency: int | None = Field(
        default=None,
        ge=1,
        description="Requests in flight at most (--max-concurrency); None: no limit.",
    )
    request_rate: float = Field(
        default=float("inf"),
        gt=0,
        description="Requests per second (--request-rate), Poisson arrivals; inf sends them "
        "all at once (the semaphore then sets the pace).",
    )
    input_tokens: int = Field(ge=1, description="Prompt length L (--random-input-len), tokens.")
    output_tokens: int = Field(ge=1, description="Output length L (--random-output-len), tokens.")
    range_ratio: float = Field(
        default=1.0,
        ge=0.0,
        le=1.0,
        description="--random-range-ratio: 1.0 (sglang) or 0.0 (vllm) gives fixed lengths.",
    )
    range_convention: Literal["sglang", "vllm"] = Field(
        default="sglang", description="Which client's rule `range_ratio` follows (above)."
    )
    warmup_requests: int = Field(
        default=0,
        ge=0,
        description="Requests sent first at the same concurrency and left out of the "
        "benchmark's metrics (--warmup-requests; aiperf/genai-perf --warmup-request-count).",
    )
    request_path: Literal["none", "engine"] = Field(
        default="none",
        description="What lies between a send and the engine: none (the engine sees the "
        "request at once), or engine: the deployment engine's measured serving path outside "
        "the forward passes (SGLang 6.91 ms; none measured for vLLM or TensorRT-LLM). Not the "
        "default: the simulated users are exact, and once their requests miss the step "
        "boundary they lock into waves (docs/serving-overheads.md, (g)).",
    )

    @model_validator(mode="after")
    def _ranges(self) -> BenchmarkWorkload:
        if self.range_convention == "vllm" and self.range_ratio >= 1.0:
            raise FieldError(
                ("range_ratio",),
                "range_ratio must be below 1 with range_convention: vllm (vllm bench serve "
                "samples [L x (1 - ratio), L x (1 + ratio)]); use e.g. 0.5",
            )
        return self

    def _bounds(self, tokens: int) -> tuple[int, int]:
        r = self.range_ratio
        if self.range_convention == "sglang":
            return max(int(tokens * r), 1), tokens
        return max(int(tokens * (1.0 - r)), 1), max(int(tokens * (1.0 + r)), 1)

    @property
    def input(self) -> UniformLength:
        """Prompt lengths as a distribution (what generic length code reads)."""
        lo, hi = self._bounds(self.input_tokens)
        return UniformLength(kind="uniform", min_tokens=lo, max_tokens=hi)

    @property
    def output(self) -> UniformLength:
        lo, hi = self._bounds(self.output_tokens)
        return UniformLength(kind="uniform", min_tokens=lo, max_tokens=hi)

    # the clients' random prompts share no prefix: nothing is cached
    prefix_cache_fraction: ClassVar[float] = 0.0
    prefix_cache_tokens: ClassVar[None] = None

    @property
    def total_requests(self) -> int:
        return self.warmup_requests + self.num_prompts


Workload = Annotated[
    PoissonWorkload | GammaWorkload | ClosedWorkload | TraceWorkload | BenchmarkWorkload,
    Field(discriminator="kind"),
]
WORKLOAD_KINDS = ("poisson", "gamma", "closed", "trace", "benchmark")
