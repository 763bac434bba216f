"""The benchmark a measured row ran, as a workload: the one place that builds it.

How the rows were driven (docs/validation.md, "How the rows were measured", has the links):
aiconfigurator's evaluation runner (`src/aiconfigurator/eval/benchmarks/genai_perf_runner.py`
in ai-dynamo/aiconfigurator, in the repository from 2025-10 until 2026-03-03, which spans the
rows' measurement dates, 2025-11 to 2026-03) ran genai-perf/aiperf with `--concurrency N
--request-count 10N --warmup-request-count 2N`, fixed ISL and OSL (stddev 0, min_tokens =
max_tokens = OSL, ignore_eos) and streaming. The deployment generator's aiperf script
(`bench_run.sh.j2`) also warms up with 2N but measures 50N (2026-02-11 to 2026-04-01) or 20N
(since); which client produced each row is not recorded, so the measured count follows the
evaluation runner and is a parameter (`BenchCounts` says why the warm-up is not simulated).

aiperf runs the warm-up as its own phase and starts profiling only when every warm-up
response has come back ("By default, AIPerf waits indefinitely for all warmup responses
before starting profiling", its warmup tutorial; `CreditIssuingStrategy._execute_phases`), so
the measured phase starts on an idle server with all N users sending at once, exactly as the
simulator's `benchmark` workload does (`sim.engine.benchmark_feed`). TTFT and TPOT are means
over the measured requests only, TPOT per request (E2E - TTFT) / (OSL - 1) (aiperf's
`InterTokenLatencyMetric`), as `sim.metrics.benchmark` computes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_args

from sim.specs.workload import BenchmarkWorkload
from sim.validate.rows import MeasuredRow

TOOL_WARMUP_PER_USER = 2  # --warmup-request-count 2N (both public clients)
LONG_OSL = 2048  # answers past this many tokens may run fewer measured requests (below)
# what a benchmark workload's `request_path` may be
REQUEST_PATHS: tuple[str, ...] = get_args(BenchmarkWorkload.model_fields["request_path"].annotation)


@dataclass(frozen=True)
class BenchCounts:
    """Requests per user (per unit of concurrency) of a row's benchmark.

    Warm-up: none by default, and that is the client's benchmark, not a shortcut. aiperf's
    2N warm-up ends before profiling starts, so the measured requests meet an idle server,
    and nothing the simulator models outlives a request (prompts are distinct: no cache to
    warm; no JIT or graph capture), so its figures are the same with the warm-up simulated
    (tests/validate/test_validate_workload.py); `TOOL_WARMUP_PER_USER` runs it literally.

    Measured: 10N as the evaluation runner sent, answers of every length. `long_per_user`
    (None: no cap) caps answers past LONG_OSL tokens for a quicker run (8,192-token answers
    take ~8x the steps per request): at 3N the first, all-at-once wave weighs 1/3 of the
    means instead of 1/10, which gave SGLang's 1K/8K row at 64 users a TTFT of 603 ms where
    10N gives 378 (420 measured), so by default they run as measured.
    """

    warmup_per_user: int = 0
    measured_per_user: int = 10
    long_per_user: int | None = None
    # what lies between a send and the engine (the benchmark workload's `request_path`):
    # none, or the row engine's measured serving path (docs/serving-overheads.md, (g))
    request_path: str = "none"

    def __post_init__(self) -> None:
        long = self.measured_per_user if self.long_per_user is None else self.long_per_user
        if self.warmup_per_user < 0 or min(self.measured_per_user, long) < 1:
            raise ValueError(
                f"benchmark counts per user: warm-up {self.warmup_per_user} must be >= 0, "
                f"measured {self.measured_per_user} and long-answer {self.long_per_user} >= 1"
            )
        if self.request_path not in REQUEST_PATHS:
            raise ValueError(
                f"request path {self.request_path!r}: use {' or '.join(REQUEST_PATHS)}"
            )

    def measured_for(self, osl: int) -> int:
        """Measured requests per user for answers of `osl` tokens."""
        if osl > LONG_OSL and self.long_per_user is not None:
            return min(self.measured_per_user, self.long_per_user)
        return self.measured_per_user


AIPERF_COUNTS = BenchCounts()


def row_workload(
    row: MeasuredRow, counts: BenchCounts = AIPERF_COUNTS
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The row's benchmark: (`benchmark` Workload spec, RunSpec) as dicts, seed 0.

    Fixed lengths (range ratio 1: every prompt ISL tokens, every answer OSL), all requests
    sent at once through an N-slot semaphore; the run ends when the last prompt is served."""
    n = row.concurrency
    workload = dict(
        kind="benchmark",
        num_prompts=counts.measured_for(row.osl) * n,
        max_concurrency=n,
        input_tokens=row.isl,
        output_tokens=row.osl,
        range_ratio=1.0,
        warmup_requests=counts.warmup_per_user * n,
        request_path=counts.request_path,
    )
    return workload, dict(seed=0)
