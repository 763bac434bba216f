"""Multi-token prediction: how many draft tokens each decode request gets accepted per step.

A verify step checks `d` draft tokens per request. Draft i is accepted with probability p_i given
that drafts 1..i-1 were, so the accepted count is the length of the leading run of successes and
the tokens a step yields are accepted + 1 (the verified token itself). The mean is
1 + sum_{i=1..d} prod_{j<=i} p_j.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def expected_accept_len(probs: tuple[float, ...]) -> float:
    """Closed form of the mean tokens per verify step."""
    return 1.0 + float(np.cumprod(np.asarray(probs, dtype=np.float64)).sum()) if probs else 1.0


class DraftSampler:
    """Samples accepted drafts for many requests at once from the run's generator."""

    def __init__(self, probs: tuple[float, ...], rng: np.random.Generator) -> None:
        # float32 uniforms: half the cost of float64, and 2^-24 resolution is ample here
        self.probs = np.asarray(probs, dtype=np.float32)
        self.rng = rng

    @property
    def draft_tokens(self) -> int:
        return int(self.probs.shape[0])

    def accepted(self, n: int) -> NDArray[np.integer]:
        """Accepted draft count (0..d) for each of `n` requests in one step (small ints)."""
        d = self.draft_tokens
        if d == 0:
            return np.zeros(n, dtype=np.int8)
        if d == 1:  # common case, one uniform per request
            return (self.rng.random(n, dtype=np.float32) < self.probs[0]).view(np.int8)
        ok = self.rng.random((n, d), dtype=np.float32) < self.probs
        # length of the leading run of True: first False's index, or d when all pass
        first_fail = np.where(ok.all(axis=1), d, np.argmin(ok, axis=1))
        return first_fail.astype(np.int8)
