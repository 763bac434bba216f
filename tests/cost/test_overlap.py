"""The two-batch schedule against hand-computed timelines, and what it saves in a step."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.catalog import load_gpu, load_model
from sim.cost.batch import BatchShape
from sim.cost.overlap import Stage, _schedule, micro_batch_step, two_batch_step
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment

V3, H800 = load_model("deepseek-v3"), load_gpu("h800")


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
    same = Stage(a, d, m, c)
    assert two_batch_step(a, d, m, c, n) == pytest.approx(
        _schedule(same, same, n), rel=1e-9, abs=1e-12
    )


def test_an_empty_first_micro_batch_leaves_the_second_serial() -> None:
    idle, whole = Stage(0.0, 0.0, 0.0, 0.0), Stage(1.0, 0.5, 2.0, 0.25)
    assert micro_batch_step(idle, whole, 10) == pytest.approx(10 * 3.75)


stage = st.builds(Stage, *[st.floats(0.0, 5.0)] * 4)


@given(stage, stage, st.integers(1, 120))
def test_unequal_micro_batches_extrapolate_like_the_full_schedule(
    a: Stage, b: Stage, n: int
) -> None:
    assert micro_batch_step(a, b, n) == pytest.approx(_schedule(a, b, n), rel=1e-9, abs=1e-12)


def decode(counts: list[int], kv: int = 4096) -> BatchShape:
    rank = np.repeat(np.arange(len(counts)), counts)
    return BatchShape(
        num_ranks=len(counts),
        rank=rank,
        new_tokens=np.ones(rank.size, dtype=np.int64),
        kv_tokens=np.full(rank.size, kv),
        is_decode=np.ones(rank.size, dtype=bool),
    )


def test_one_request_per_rank_is_not_split() -> None:
    """SGLang halves a decode batch by requests: one request gives an empty micro-batch and a
    whole one, so two-batch overlap neither hides nor adds anything."""
    on = ServingCostModel(V3, H800, Deployment(name="on", nodes=2, two_batch_overlap=True))
    off = ServingCostModel(V3, H800, Deployment(name="off", nodes=2))
    step = on.step_cost(decode([1] * 16))
    assert step.overlap_saved_s == 0.0
    assert step.duration_s == off.step_cost(decode([1] * 16)).duration_s
    assert on.step_cost(decode([2] * 16)).overlap_saved_s != 0.0  # two requests split


def test_one_small_rank_does_not_switch_the_overlap_off() -> None:
    """A rank with one request puts it in the second micro-batch; the others still overlap."""
    cm = ServingCostModel(V3, H800, Deployment(name="on", nodes=4, two_batch_overlap=True))
    full = cm.step_cost(decode([256] * 32)).overlap_saved_s
    assert full > 0
    assert cm.step_cost(decode([256] * 31 + [1])).overlap_saved_s == pytest.approx(full, rel=0.01)


def _step(new: list[list[int]], tbo: bool) -> float:
    """overlap_saved_s of one EP16 step: new[r] lists the new tokens of rank r's requests
    (1: a decode request, more: a prefill chunk), each with 2,000 cached tokens."""
    rank = np.repeat(np.arange(len(new)), [len(r) for r in new])
    tokens = np.concatenate([np.array(r) for r in new])
    batch = BatchShape(
        num_ranks=len(new),
        rank=rank,
        new_tokens=tokens,
        kv_tokens=np.full(rank.size, 2000),
        is_decode=tokens == 1,
    )
    d = Deployment(name="ep16", nodes=2, attn_tp=1, two_batch_overlap=tbo)
    return ServingCostModel(V3, H800, d).step_cost(batch).overlap_saved_s


def test_two_batches_only_when_every_rank_runs_the_same_forward_mode() -> None:
    """SGLang splits a step only when all busy DP ranks agree: all decode or all extend."""
    decode, chunk = [1] * 256, [1] * 255 + [512]
    assert _step([decode] * 16, tbo=True) > 0  # all decode
    assert _step([chunk] * 16, tbo=True) > 0  # all extend (a chunk beside decode requests)
    assert _step([[]] * 8 + [decode] * 8, tbo=True) > 0  # idle ranks do not vote
    assert _step([chunk] + [decode] * 15, tbo=True) == 0  # one rank prefills: the step runs whole
    assert _step([decode] * 16, tbo=False) == 0
