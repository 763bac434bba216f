"""`distinct`: np.unique's values and inverse, in Python for a step's few ranks."""

from __future__ import annotations

import numpy as np

from sim.cost.batch import FEW_DISTINCT, distinct


def test_distinct_is_np_unique_with_its_inverse() -> None:
    rng = np.random.default_rng(3)
    for n in [1, 2, 7, FEW_DISTINCT, FEW_DISTINCT + 1, 500]:
        for high in [1, 3, 50, 10_000]:
            a = rng.integers(0, high, n).astype(np.intp)
            kinds, at = distinct(a)
            want_kinds, want_at = np.unique(a, return_inverse=True)
            assert kinds == want_kinds.tolist()
            assert at.tolist() == want_at.tolist()
            assert np.array_equal(np.asarray(kinds)[at], a)  # the inverse rebuilds the input
