"""Summary statistics of latency samples: mean and percentiles, plain, weighted, or with
right-censored samples (requests still waiting at the end of a run)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from sim.specs.base import Spec


class Percentiles(Spec):
    """Mean and percentiles of one latency, seconds (null when there were no samples)."""

    mean: float | None = Field(description="Mean, seconds.")
    p50: float | None = Field(description="Median, seconds.")
    p90: float | None = Field(description="90th percentile, seconds.")
    p99: float | None = Field(description="99th percentile, seconds.")
    count: int = Field(
        description="Observed samples (censored ones, requests still waiting at the end, also "
        "shape p50/p90/p99 but are not counted)."
    )
    exceeds_s: float | None = Field(
        default=None,
        description="Set where a percentile is null because requests still waiting at the end "
        "outnumber its tail: that percentile exceeds this, the largest value observed (with "
        "none observed, the median wait so far, which p50, p90 and p99 all exceed).",
    )


EMPTY = Percentiles(mean=None, p50=None, p90=None, p99=None, count=0)


def percentiles(values: NDArray[np.float64]) -> Percentiles:
    v = values[np.isfinite(values)]
    if v.size == 0:
        return EMPTY
    p50, p90, p99 = np.percentile(v, [50, 90, 99])
    return Percentiles(
        mean=float(v.mean()), p50=float(p50), p90=float(p90), p99=float(p99), count=int(v.size)
    )


def weighted_quantile(values: NDArray[np.float64], weights: NDArray[np.float64], q: float) -> float:
    """Quantile `q` (0..1) of `values` where value i counts `weights[i]` times (inverted CDF)."""
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    cum = np.cumsum(w)
    k = int(np.searchsorted(cum, q * cum[-1], side="left"))
    return float(v[min(k, v.size - 1)])


def weighted_percentiles(values: NDArray[np.float64], weights: NDArray[np.float64]) -> Percentiles:
    keep = weights > 0
    v, w = values[keep], weights[keep]
    if v.size == 0:
        return EMPTY
    return Percentiles(
        mean=float(np.average(v, weights=w)),
        p50=weighted_quantile(v, w, 0.50),
        p90=weighted_quantile(v, w, 0.90),
        p99=weighted_quantile(v, w, 0.99),
        count=int(w.sum()),
    )


def quantile(values: NDArray[np.float64], percentile: float) -> float | None:
    v = values[np.isfinite(values)]
    return float(np.percentile(v, percentile)) if v.size else None


def censored_quantile(
    observed: NDArray[np.float64], censored: NDArray[np.float64], percentile: float
) -> float | None:
    """Percentile of a latency some samples of which are only known to exceed a value (a
    request still waiting at the end has waited at least this long), by the Kaplan-Meier
    estimate: the smallest observed value at which the estimated share of larger latencies
    falls to 1 - percentile/100. A waiting request leaves the count at its lower bound
    instead of being dropped or taken at it, so a backlog of long waits raises the estimate.
    None when censored samples keep the share above that level (the percentile lies beyond
    every observed value), or without samples. Without censored samples: `quantile`."""
    if censored.size == 0:
        return quantile(observed, percentile)
    if observed.size == 0:
        return None
    times = np.concatenate([observed, censored])
    event = np.concatenate([np.ones(observed.size, bool), np.zeros(censored.size, bool)])
    order = np.lexsort((~event, times))  # by time; at a tie, events before censorings
    at_risk = times.size - np.arange(times.size)
    survival = np.cumprod(np.where(event[order], 1.0 - 1.0 / at_risk, 1.0))
    below = np.flatnonzero(event[order] & (survival <= 1.0 - percentile / 100 + 1e-12))
    return float(times[order][below[0]]) if below.size else None


def censored_percentiles(
    observed: NDArray[np.float64], censored: NDArray[np.float64]
) -> Percentiles:
    """`percentiles` of `observed`, with p50/p90/p99 from `censored_quantile` when some samples
    are censored (the mean stays over the observed ones), and `exceeds_s` where one is None:
    the largest value observed, or with none observed the median censored time (every true
    value is at least its censoring time, so p50, p90 and p99 are at least that median)."""
    plain = percentiles(observed)
    if censored.size == 0:
        return plain
    if plain.count == 0:  # each true value is at least its wait: so is every quantile's
        return plain.model_copy(update={"exceeds_s": float(np.median(censored))})
    p50, p90, p99 = (censored_quantile(observed, censored, q) for q in (50, 90, 99))
    beyond = float(observed[np.isfinite(observed)].max()) if p99 is None else None
    return plain.model_copy(update={"p50": p50, "p90": p90, "p99": p99, "exceeds_s": beyond})


BATCHES = 10  # sub-windows of a batch-means interval
T_975_9 = 2.262  # Student's t, 97.5th percentile, 9 degrees of freedom (BATCHES - 1)


def batch_rates(
    times: NDArray[np.float64], amounts: NDArray[np.float64], lo: float, hi: float
) -> NDArray[np.float64] | None:
    """The rate of `amounts` (per second) in each of BATCHES equal parts of [lo, hi], by the
    time of each amount; None when some part holds no event."""
    if hi <= lo:
        return None
    part = np.floor((times - lo) / (hi - lo) * BATCHES).astype(np.int64)
    keep = (part >= 0) & (part < BATCHES)
    if not keep.any() or (np.bincount(part[keep], minlength=BATCHES) == 0).any():
        return None
    sums = np.bincount(part[keep], weights=amounts[keep], minlength=BATCHES)
    return sums.astype(np.float64) / ((hi - lo) / BATCHES)


def batch_means_ci95(
    times: NDArray[np.float64], amounts: NDArray[np.float64], lo: float, hi: float
) -> float | None:
    """Half-width of a 95% confidence interval of the rate of `amounts` (per second) over
    [lo, hi], by batch means: the window cut into BATCHES equal parts, each part's rate one
    sample, the interval Student's t over their spread. Parts long against the correlation of
    successive steps make the samples near independent; where a run moves in waves longer than
    a part, the interval is wide, which is the point: it says how much the figure depends on
    where the window falls. None when some part holds no event."""
    return rates_ci95(batch_rates(times, amounts, lo, hi))


def rates_ci95(rates: NDArray[np.float64] | None) -> float | None:
    """Half-width of the 95% interval of the mean of `rates`, one per part (None: no rates)."""
    return None if rates is None else float(T_975_9 * rates.std(ddof=1) / np.sqrt(rates.size))


def paired_ratio_ci95(a: NDArray[np.float64], b: NDArray[np.float64]) -> tuple[float, float] | None:
    """Ratio of two rates measured over the same parts of one window (two deployments of one
    scenario), mean(a) / mean(b), and the half-width of its 95% interval. Pairing the parts
    cancels what both share (a burst of arrivals, a wave of long prompts: all of it when both
    see the same requests at the same times, less under a closed loop), so the ratio is surer
    than either rate. Ratio estimator: the spread of a_i - R b_i over sqrt(n) mean(b),
    Student's t. None without a positive mean(b)."""
    mb = float(b.mean())
    if mb <= 0 or a.size != b.size or a.size < 2:
        return None
    ratio = float(a.mean()) / mb
    spread = (a - ratio * b).std(ddof=1) / (np.sqrt(a.size) * mb)
    return ratio, float(T_975_9 * spread)
