"""Rate and OpTime: the slower resource plus the fixed part; sums keep the weakest source."""

from __future__ import annotations

import random

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


def test_combine_is_the_sum_of_its_live_pieces_in_order() -> None:
    """`combine` in one pass gives what summing the live pieces in order gives (from 0, as
    `sum` adds on Python 3.11), labelled with the first of the weakest sources: random pieces
    of every source (one unknown), some empty, some extrapolated, to the last bit."""
    rank = {"roofline": 0, "published": 1, "measured": 2, "other": 0}
    rng = random.Random(5)
    for _ in range(2_000):
        pieces = [
            OpTime(
                seconds=rng.choice([0.0, rng.random() * 10 ** rng.randint(-7, 1)]),
                source=rng.choice(list(rank)),
                extrapolated=rng.random() < 0.3,
                launches=rng.choice([0.0, 1.0, 61.0, rng.random()]),
            )
            for _ in range(rng.randint(0, 7))
        ]
        live = [t for t in pieces if t.seconds > 0.0]
        got = combine(*pieces)
        if not live:
            assert got is ZERO
            continue
        seconds: float = 0
        launches: float = 0
        for t in live:
            seconds, launches = seconds + t.seconds, launches + t.launches
        weakest = min(live, key=lambda t: rank[t.source]).source
        extrapolated = any(t.extrapolated for t in live)
        assert got == OpTime(
            seconds=seconds, source=weakest, extrapolated=extrapolated, launches=launches
        )
