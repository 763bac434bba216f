"""What a benchmark client reports, computed as SGLang `bench_serving` and `vllm bench serve` do.

Over the benchmark's requests only (warm-up left out), from the client's side: a request's TTFT
is its first token's arrival minus its send time, E2E its last token's minus its send time, its
TPOT (E2E - TTFT) / (output tokens - 1) for outputs longer than one token; each statistic is
then taken over requests (mean, median, p99), so every request weighs the same in mean TPOT
whatever its length. ITL is every gap between two tokens of one request, over all requests
(its mean is the sum of decode times over the sum of gaps). The benchmark's duration runs from
its start (all warm-up requests finished) to its last request's end; throughputs are totals
over that duration. docs/reading-results.md gives the formulas beside the other workloads'.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from sim.engine import Phase, RunRecord
from sim.metrics.requests import token_gaps
from sim.metrics.stats import weighted_quantile
from sim.specs.base import Spec


class BenchmarkStat(Spec):
    """Mean, median and 99th percentile of one latency, milliseconds (None: no sample)."""

    mean_ms: float | None = Field(description="Mean over the samples, ms.")
    median_ms: float | None = Field(description="Median, ms.")
    p99_ms: float | None = Field(description="99th percentile, ms.")


class BenchmarkResults(Spec):
    """A benchmark client's summary, as its result file would give it."""

    completed: int = Field(description="Benchmark requests that finished.")
    failed: int = Field(description="Benchmark requests refused (they can never fit).")
    duration_s: float = Field(description="From the benchmark's start to its last request's end.")
    total_input_tokens: int = Field(description="Prompt tokens of the completed requests.")
    total_output_tokens: int = Field(description="Output tokens of the completed requests.")
    request_throughput_req_s: float = Field(description="completed / duration.")
    input_throughput_tok_s: float = Field(description="total_input_tokens / duration.")
    output_throughput_tok_s: float = Field(description="total_output_tokens / duration.")
    ttft: BenchmarkStat = Field(description="Time to first token, per request.")
    tpot: BenchmarkStat = Field(description="(E2E - TTFT) / (output - 1), per request.")
    itl: BenchmarkStat = Field(description="Gaps between consecutive tokens, all requests.")
    e2e: BenchmarkStat = Field(description="End-to-end latency, per request.")


def _stat(x: np.ndarray, weights: np.ndarray | None = None) -> BenchmarkStat:
    """As the clients compute them: numpy's mean, median and linear-interpolated percentile
    (token gaps come weighted, one weight per request a step served)."""
    if x.size == 0:
        return BenchmarkStat(mean_ms=None, median_ms=None, p99_ms=None)
    if weights is None:
        return BenchmarkStat(
            mean_ms=float(np.mean(x)) * 1e3,
            median_ms=float(np.median(x)) * 1e3,
            p99_ms=float(np.percentile(x, 99)) * 1e3,
        )
    w = weights
    return BenchmarkStat(
        mean_ms=float(np.average(x, weights=w)) * 1e3,
        median_ms=weighted_quantile(x, w, 0.5) * 1e3,
        p99_ms=weighted_quantile(x, w, 0.99) * 1e3,
    )


def summarize_benchmark(run: RunRecord) -> BenchmarkResults | None:
    """The benchmark summary of a run under a benchmark workload (None for other workloads)."""
    client = run.benchmark
    if client is None:
        return None
    t, n = run.requests, run.requests.size
    bench = np.arange(n) >= client.warmup_requests
    phase = t.phase
    done = bench & (phase == Phase.DONE)
    start = client.start_s if client.start_s is not None else float("nan")
    sent = t.arrival_s
    first = t.first_token_s + client.egress_s  # the client reads tokens egress_s later
    finish = t.finish_s + client.egress_s
    ttft, e2e = (first - sent)[done], (finish - sent)[done]
    out_tok = t.output_tokens[done]
    many = out_tok > 1
    tpot = (e2e - ttft)[many] / (out_tok[many] - 1)
    end = float(finish[done].max()) if done.any() else start
    duration = max(end - start, 1e-12) if np.isfinite(start) else 0.0
    total_in, total_out = int(t.input_tokens[done].sum()), int(out_tok.sum())
    lo = start if np.isfinite(start) else 0.0
    gaps, weights = token_gaps(run, lambda start, dur: (start >= lo) & (start + dur <= end))
    per_s = 1.0 / duration if duration > 0 else 0.0
    return BenchmarkResults(
        completed=int(done.sum()),
        failed=int((bench & (phase == Phase.REJECTED)).sum()),
        duration_s=duration,
        total_input_tokens=total_in,
        total_output_tokens=total_out,
        request_throughput_req_s=int(done.sum()) * per_s,
        input_throughput_tok_s=total_in * per_s,
        output_throughput_tok_s=total_out * per_s,
        ttft=_stat(ttft),
        tpot=_stat(tpot),
        itl=_stat(gaps[weights > 0], weights[weights > 0]),
        e2e=_stat(e2e),
    )
