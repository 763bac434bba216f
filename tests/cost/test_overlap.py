"""The two-batch schedule against hand-computed timelines."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.cost.overlap import _schedule, two_batch_step


def test_no_communication_is_just_compute() -> None:
    assert two_batch_step(1.0, 0.0, 2.0, 0.0, layers=3) == pytest.approx(3 * (2 * 1.0 + 2 * 2.0))


def test_one_layer_by_hand() -> None:
    # A1 0-1, A2 1-2; D1 1-2, D2 2-3; M1 2-4, M2 4-6; C1 4-5, C2 6-7
    assert two_batch_step(1.0, 1.0, 2.0, 1.0, layers=1) == pytest.approx(7.0)


def test_comm_bound_approaches_comm_time() -> None:
    t = two_batch_step(0.01, 1.0, 0.01, 1.0, layers=50)
    assert t == pytest.approx(50 * 4.0, rel=0.01)


@given(
    st.floats(0.0, 5.0),
    st.floats(0.0, 5.0),
    st.floats(0.0, 5.0),
    st.floats(0.0, 5.0),
    st.integers(1, 8),
)
def test_between_overlap_bound_and_serial(a: float, d: float, m: float, c: float, n: int) -> None:
    t = two_batch_step(a, d, m, c, n)
    compute, comm = n * 2 * (a + m), n * 2 * (d + c)
    assert max(compute, comm) - 1e-9 <= t <= compute + comm + 1e-9


@given(
    st.floats(0.0, 5.0),
    st.floats(0.0, 5.0),
    st.floats(0.0, 5.0),
    st.floats(0.0, 5.0),
    st.integers(1, 120),
)
def test_periodic_extrapolation_equals_the_full_schedule(
    a: float, d: float, m: float, c: float, n: int
) -> None:
    assert two_batch_step(a, d, m, c, n) == pytest.approx(
        _schedule(a, d, m, c, n), rel=1e-9, abs=1e-12
    )
