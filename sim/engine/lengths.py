"""Drawing request lengths from the workload's distributions (registry keyed by `kind`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from sim.engine.requests import IntArray
from sim.specs.workload import (
    EmpiricalLength,
    FixedLength,
    LognormalLength,
    UniformLength,
)

Dist = FixedLength | UniformLength | LognormalLength | EmpiricalLength


def _fixed(d: FixedLength, rng: np.random.Generator, n: int) -> IntArray:
    return np.full(n, d.tokens, dtype=np.int64)


def _uniform(d: UniformLength, rng: np.random.Generator, n: int) -> IntArray:
    return rng.integers(d.min_tokens, d.max_tokens + 1, size=n, dtype=np.int64)


def _lognormal(d: LognormalLength, rng: np.random.Generator, n: int) -> IntArray:
    mu = math.log(d.mean_tokens) - d.sigma**2 / 2.0  # so that E[length] = mean_tokens
    x = np.rint(rng.lognormal(mu, d.sigma, size=n)).astype(np.int64)
    return np.clip(x, d.min_tokens, d.max_tokens)  # type: ignore[no-any-return]


def _empirical(d: EmpiricalLength, rng: np.random.Generator, n: int) -> IntArray:
    values = np.asarray(d.values, dtype=np.int64)
    if d.weights is None:
        return values[rng.integers(0, values.shape[0], size=n)]  # type: ignore[no-any-return]
    w = np.asarray(d.weights, dtype=np.float64)
    return rng.choice(values, size=n, p=w / w.sum())  # type: ignore[no-any-return]


SAMPLERS: dict[str, Callable[[Any, np.random.Generator, int], IntArray]] = {
    "fixed": _fixed,
    "uniform": _uniform,
    "lognormal": _lognormal,
    "empirical": _empirical,
}


def sample_lengths(dist: Dist, rng: np.random.Generator, n: int) -> IntArray:
    """`n` lengths (tokens); ValueError lists the known kinds for an unknown one."""
    sampler = SAMPLERS.get(dist.kind)
    if sampler is None:
        raise ValueError(f"unknown length kind {dist.kind!r}: known are {', '.join(SAMPLERS)}")
    return sampler(dist, rng, n)


def cap_cached(cached: IntArray, input_tokens: IntArray) -> IntArray:
    """A prefix hit never covers the whole prompt: the last prompt token is always computed."""
    return np.clip(cached, 0, np.maximum(input_tokens - 1, 0))  # type: ignore[no-any-return]
