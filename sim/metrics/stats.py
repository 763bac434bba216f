"""Summary statistics of latency samples: mean and percentiles, plain or weighted."""

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
    count: int = Field(description="Samples the figures come from.")


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
