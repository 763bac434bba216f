"""The memo's 2^(1/p) buckets and their centres: what scalar Python arithmetic gives, element by
element, so a run's keys do not depend on which SIMD code path numpy takes on a CPU."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.cost.memo import FEW_VALUES, bucket, buckets, centre, centres


@pytest.mark.parametrize("per_octave", [16, 64])
def test_buckets_of_token_counts_are_the_scalar_rounding(per_octave: int) -> None:
    rng = np.random.default_rng(7)
    # token counts and context sums as a run makes them: whole numbers, small and large
    x = np.concatenate(
        [np.arange(1, 5000), rng.integers(5000, 3_000_000, 20_000), [2.0**40, 3.0 * 2**40]]
    ).astype(np.float64)
    want = [round(math.log2(v) * per_octave) for v in x.tolist()]
    assert buckets(x, per_octave).tolist() == want
    assert [bucket(v, per_octave) for v in x.tolist()] == want
    few = [buckets(x[i : i + FEW_VALUES], per_octave) for i in range(0, 4000, FEW_VALUES)]
    assert np.concatenate(few).tolist() == want[:4000]  # a few at a time: one by one


def test_buckets_step_up_at_each_edge_and_never_fall() -> None:
    p = 16
    edges = np.array([2.0 ** ((k + 0.5) / p) for k in range(-80, 80)])
    below, above = np.nextafter(edges, 0.0), np.nextafter(edges, np.inf)
    # one ulp either side of the edge between bucket k and k + 1
    assert np.array_equal(buckets(below) + 1, buckets(above))
    grid = np.sort(np.concatenate([below, edges, above, np.geomspace(0.01, 100.0, 5000)]))
    assert np.all(np.diff(buckets(grid)) >= 0)


@pytest.mark.parametrize("per_octave", [16, 64])
def test_centres_are_the_scalar_powers_of_two(per_octave: int) -> None:
    b = np.arange(-2000, 4000)
    want = [2.0 ** (k / per_octave) for k in b.tolist()]
    assert centres(b, per_octave).tolist() == want
    assert [centre(k, per_octave) for k in b.tolist()] == want
    if per_octave == 16:
        assert [centre(k) for k in b.tolist()] == want
    assert np.array_equal(buckets(centres(b, per_octave), per_octave), b)
