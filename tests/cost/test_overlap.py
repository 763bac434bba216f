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
from tests.builders import decode_ranks

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
    return decode_ranks(counts, kv)


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
    d = Deployment(name="on", nodes=4, two_batch_overlap=True, expert_zipf_exponent=0)
    cm = ServingCostModel(V3, H800, d)
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
    # all decode: split (on the datasheet roofline EP16's exchange is short, and the hook
    # kernels' SM time on the compute stream can outweigh what it hides)
    assert _step([decode] * 16, tbo=True) != 0
    assert _step([chunk] * 16, tbo=True) > 0  # all extend (a chunk beside decode requests)
    assert _step([[]] * 8 + [decode] * 8, tbo=True) != 0  # idle ranks do not vote
    assert _step([chunk] + [decode] * 15, tbo=True) == 0  # one rank prefills: the step runs whole
    assert _step([decode] * 16, tbo=False) == 0


def test_low_latency_send_and_receive_run_on_the_compute_stream() -> None:
    """One layer by hand, send 0.5 and receive 0.25 on the compute stream: A1 0-1 + send
    -1.5, A2 -3.0; D1 1.5-2.5, D2 3.0-4.0; M1 recv + M + send 3.0-5.75, M2 -8.5; C1 5.75-6.75,
    C2 8.5-9.5; the combines' receives 8.5-8.75 and 9.5-9.75."""
    mb = Stage(1.0, 1.0, 2.0, 1.0, send_s=0.5, recv_s=0.25)
    assert _schedule(mb, mb, 1) == pytest.approx(9.75)
    assert micro_batch_step(mb, mb, 40) == pytest.approx(_schedule(mb, mb, 40), rel=1e-9)


def test_hook_kernels_cost_the_decode_overlap_sm_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """At EP72 with 256 requests per GPU on H800's published kernels, the low-latency
    kernels' send and receive on the compute stream take part of what two-batch overlap
    hides (the transfer left on the communication stream is shorter by as much, which
    helps only where communication is the longer side: on the datasheet roofline it is)."""
    from sim.catalog.profiles import load_profile
    from sim.cost import overlap

    pub = load_profile("h800-published")

    d = Deployment(name="on", nodes=9, attn_tp=1, two_batch_overlap=True, eplb_redundant_experts=32)
    batch = decode([256] * 72, kv=2000)
    with_hooks = ServingCostModel(V3, H800, d, pub).step_cost(batch)
    monkeypatch.setattr(overlap, "LOW_LATENCY_SEND_S", 0.0)
    monkeypatch.setattr(overlap, "LOW_LATENCY_RECV_S", 0.0)
    without = ServingCostModel(V3, H800, d, pub).step_cost(batch)
    assert 0 < with_hooks.overlap_saved_s < without.overlap_saved_s


def test_hook_kernels_follow_deepeps_measured_token_dependence() -> None:
    """The send and receive kernels' time away from the trace's 64 tokens per GPU follows
    DeepEP's one-node low-latency dispatch + combine latency (aiconfigurator-core's H100 SGLang
    table), where all their work is SM work: mostly fixed, so 16 tokens keep half of it (not a
    quarter, as a time in proportion to tokens would), 128 tokens cost 1.63x (not 2x)."""
    from sim.cost.overlap import (
        LOW_LATENCY_RECV_S,
        LOW_LATENCY_SEND_S,
        LOW_LATENCY_TOKEN_CURVE_US,
        hook_kernel_scale,
    )

    assert hook_kernel_scale(64) == pytest.approx(1.0)
    assert hook_kernel_scale(16) == pytest.approx(35.9 / 68.8)
    assert 16 / 64 < hook_kernel_scale(16) < 1.0
    assert hook_kernel_scale(128) == pytest.approx(112.2 / 68.8)
    assert hook_kernel_scale(0.0) == hook_kernel_scale(1)  # launched even for an empty part
    scales = [hook_kernel_scale(t) for t in (1, 3, 16, 100, 700, 2048, 4096)]
    assert scales == sorted(scales)
    last_tokens, last_us = LOW_LATENCY_TOKEN_CURVE_US[-1]
    assert hook_kernel_scale(2 * last_tokens) == pytest.approx(2 * last_us / 68.8)
    # cross-check, not a source: LMSYS's decode breakdown (2025-05-05 post) puts DeepEP's
    # dispatch at "0.06 ms occupying SMs" in unit tests at 128 tokens per micro-batch
    sm_time = (LOW_LATENCY_SEND_S + LOW_LATENCY_RECV_S) * hook_kernel_scale(128)
    assert sm_time == pytest.approx(60e-6, rel=0.1)


def test_only_the_moe_layers_are_split() -> None:
    """SGLang splits the MoE layers only: the head (and the first dense layers, the MTP draft)
    run once over the whole batch, so a dearer head changes the step but not the saving."""
    d = Deployment(name="on", nodes=2, attn_tp=1, two_batch_overlap=True)
    batch = decode([128] * 16)
    big_head = V3.model_copy(update={"vocab_size": 2 * V3.vocab_size})
    steps = [ServingCostModel(m, H800, d).step_cost(batch) for m in (V3, big_head)]
    assert steps[1].duration_s > steps[0].duration_s
    assert steps[1].overlap_saved_s == pytest.approx(steps[0].overlap_saved_s, rel=1e-9)
    from sim.cost.overlap import moe_layer_share

    assert moe_layer_share(V3, "dense_mlp") == 0.0 and moe_layer_share(V3, "moe_gate") == 1.0
    assert moe_layer_share(V3, "attn_proj") == pytest.approx(58 / 61)


def test_compute_beside_normal_kernels_runs_on_the_sms_they_leave(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DeepEP's normal (prefill) kernels hold 24 of 132 SMs (its README's inference-prefill
    setting): a prefill step's overlapped compute is slower than with 20, so it saves less."""
    from sim.cost import overlap

    assert round(132 * overlap.NORMAL_KERNEL_SM_SHARE, 9) == 24
    rank = np.arange(16)
    batch = BatchShape(
        num_ranks=16,
        rank=rank,
        new_tokens=np.full(16, 4096),
        kv_tokens=np.full(16, 4096),
        is_decode=np.zeros(16, dtype=bool),
    )
    d = Deployment(name="on", nodes=2, attn_tp=1, two_batch_overlap=True)
    saved_24 = ServingCostModel(V3, H800, d).step_cost(batch).overlap_saved_s
    monkeypatch.setattr(overlap, "NORMAL_KERNEL_SM_SHARE", 20 / 132)
    saved_20 = ServingCostModel(V3, H800, d).step_cost(batch).overlap_saved_s
    assert saved_24 < saved_20
