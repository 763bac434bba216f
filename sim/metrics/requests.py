"""Per-request TTFT, TPOT and E2E of one deployment's run: the one place they are computed.

`summarize` takes its latency percentiles and goodput from these arrays, `mlasim run --requests`
writes them as columns (`sim.io.requests_io`), and the app draws its latency CDFs from them, so
the three cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from sim.engine import Phase, RunRecord

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


@dataclass(frozen=True, kw_only=True)
class RequestLatencies:
    """Latencies of every arrived request, seconds, indexed by request id (arrival order).

    A time the request has not reached is NaN: `ttft_s` without a first token, `e2e_s` before it
    finished, `tpot_s` unless it finished with more than one output token (TPOT is
    (finish - first token) / (output tokens - 1)).
    """

    ttft_s: FloatArray
    tpot_s: FloatArray
    e2e_s: FloatArray
    done: BoolArray  # completed (phase DONE)
    after_warmup: BoolArray  # arrived at or after the warm-up
    age_s: FloatArray  # time from arrival to the end of the run (NaN if rejected): what an
    # unfinished request's latencies are at least

    @property
    def measured(self) -> BoolArray:
        """Requests TPOT and E2E statistics are over: arrived in the window and completed."""
        return self.done & self.after_warmup

    def samples(self) -> dict[str, FloatArray]:
        """TTFT samples of the requests that arrived in the window and got a first token
        (finished or not); TPOT and E2E samples of the measured ones (TPOT: multi-token
        outputs)."""
        m = self.measured
        tpot = self.tpot_s[m]
        ttft = self.ttft_s[self.after_warmup]
        return {
            "TTFT": ttft[np.isfinite(ttft)],
            "TPOT": tpot[np.isfinite(tpot)],
            "E2E": self.e2e_s[m],
        }

    def ttft_censored(self) -> FloatArray:
        """Lower bounds on the TTFT of requests that arrived in the window and were still
        waiting for a first token at the end (rejected ones are not waiting)."""
        return self._censored(np.isnan(self.ttft_s))

    def e2e_censored(self) -> FloatArray:
        """Lower bounds on the E2E latency of requests that arrived in the window and were
        still unfinished at the end (rejected ones are not)."""
        return self._censored(~self.done)

    def _censored(self, unreached: BoolArray) -> FloatArray:
        age = self.age_s[self.after_warmup & unreached]
        return age[np.isfinite(age)]


def request_latencies(run: RunRecord) -> RequestLatencies:
    """TTFT, TPOT and E2E of every request of a run."""
    t = run.requests
    arrival, first, finish = t.arrival_s, t.first_token_s, t.finish_s
    out_len = t.output_tokens
    done = t.phase == Phase.DONE
    multi = done & (out_len > 1)
    rejected = t.phase == Phase.REJECTED
    return RequestLatencies(
        ttft_s=first - arrival,
        tpot_s=np.where(multi, (finish - first) / np.maximum(out_len - 1, 1), np.nan),
        e2e_s=finish - arrival,
        done=done,
        after_warmup=arrival >= run.warmup_s,
        age_s=np.where(rejected, np.nan, run.end_s - arrival),
    )


StepWindow = Callable[[NDArray[np.float64], NDArray[np.float64]], NDArray[np.bool_]]


def token_gaps(
    run: RunRecord, counted: StepWindow
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Gaps between token deliveries in the steps `counted(start_s, duration_s)` keeps, weighted:
    each step's duration once per decode request it served (steps run back to back, so a
    request's gap is the step it was in), plus the longer gaps of requests that sat earlier steps
    out (unmixed chunks), whose gaps span them."""
    vals, weights = [], []
    for pool in run.pools:
        log = pool.log
        start, dur = log.column("start_s"), log.column("duration_s")
        keep = counted(start, dur)
        served = log.column("decode_reqs").astype(np.float64)
        for step, gaps in pool.late_gaps:
            served[step] -= gaps.shape[0]
            if keep[step]:
                vals.append(gaps)
                weights.append(np.ones(gaps.shape[0]))
        vals.append(dur[keep])
        weights.append(served[keep])
    return np.concatenate(vals), np.concatenate(weights)
