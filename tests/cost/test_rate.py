"""Rate and OpTime: the slower resource plus the fixed part; sums keep the weakest source."""

from __future__ import annotations

import pytest

from sim.cost.rate import ZERO, OpTime, Rate, combine, scale


def test_rate_prices_the_slower_resource_plus_the_fixed_part() -> None:
    rate = Rate(compute_s_per_s=2.0, memory_s_per_s=1.25, fixed_s=5e-6, source="measured")
    assert rate.compute_efficiency == 0.5 and rate.memory_efficiency == 0.8
    memory_bound = rate.time(compute_s=1e-6, memory_s=4e-6)
    assert memory_bound.seconds == pytest.approx(1.25 * 4e-6 + 5e-6, rel=1e-15)
    assert (memory_bound.source, memory_bound.extrapolated) == ("measured", False)
    compute_bound = rate.time(compute_s=4e-6, memory_s=1e-6)
    assert compute_bound.seconds == pytest.approx(2.0 * 4e-6 + 5e-6, rel=1e-15)
    link = Rate(compute_s_per_s=0.0, memory_s_per_s=1.0, fixed_s=0.0, source="roofline")
    assert link.compute_efficiency == float("inf")


def test_combine_sums_and_keeps_the_weakest_source() -> None:
    measured = OpTime(seconds=1.0, source="measured")
    guessed = OpTime(seconds=0.5, source="roofline", extrapolated=True)
    both = combine(measured, guessed, ZERO)
    assert both == OpTime(seconds=1.5, source="roofline", extrapolated=True)
    assert combine(ZERO, ZERO) == ZERO
    assert scale(measured, 61) == OpTime(seconds=61.0, source="measured")
