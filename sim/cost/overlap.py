"""Two-batch overlap as a schedule: two micro-batches on a compute stream and a comm stream.

Each MoE layer runs, per micro-batch b: attention and the rank's own work A_b, then the expert
dispatch D_b, the routed experts M_b, the combine C_b; the next layer's A_b waits for C_b. The
compute stream runs A1, A2, M1, M2 and the communication stream D1, D2, C1, C2, each in order;
an op starts when its stream is free and its input is ready. The step lasts until the last
combine of the last layer. With compute and communication balanced this approaches
max(compute, comm); when one side dominates it approaches that side plus the other's exposed part.
The micro-batches need not be equal: a rank that cannot split (one decode request) runs all its
work in the second, as SGLang's split of one request gives an empty first micro-batch.

Only the MoE layers are split, as in SGLang (`two_batch_overlap.py` splits the layers from the
first MoE layer on): the first dense layers, the output head and the MTP draft run once per
step over the whole batch, before or after the overlapped layers.

DeepEP's low-latency kernels (decode) run with a receive hook on the compute stream: both
micro-batches share one CUDA stream, on which each dispatch and combine issues a send kernel
and later a receive kernel; only the network transfer between them is off the stream. Their SM
time therefore sits on the compute stream (`Stage.send_s`, `Stage.recv_s`), and the rest of the
published exchange latency is the transfer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.cost.rate import OpTime
from sim.specs.model import ModelSpec

# DeepEP's normal (prefill) kernels keep SMs busy moving data, so compute that overlaps them
# runs on the rest. DeepEP's README configures its inference-prefill example with
# `Buffer.set_num_sms(24)` (of an H800's 132), more than the 20 SMs the DeepSeek-V3 paper says
# saturate IB + NVLink: under overlap the GEMMs keep 108 SMs. No kernel-level timing of the
# normal kernels under overlap is published (deepseek-ai/profile-data's prefill trace is a
# Chrome trace, not tabulated; aiconfigurator-core's DeepEP normal tables are isolated
# intranode runs), so their bandwidth stays at the README's isolated figures.
NORMAL_KERNEL_SM_SHARE = 24 / 132

# DeepEP low-latency kernels in hook mode, per dispatch or combine of one micro-batch, on the
# compute stream: the send kernel (17-19 us) and the receive hook's own work (17 us, the
# shortest hook in the trace: longer hooks, up to 86 us, are waiting for data still in flight,
# which the schedule models by the transfer's end). Kernel durations of `dispatch_ll` /
# `combine_ll` in DeepSeek's decode trace (deepseek-ai/profile-data decode.json: EP128,
# 128 requests per GPU in two micro-batches of 64 tokens, one stream), as read in issue #22.
LOW_LATENCY_SEND_S = 18e-6
LOW_LATENCY_RECV_S = 17e-6
LOW_LATENCY_TRACE_TOKENS = 64

# How those kernels' time depends on the micro-batch's tokens per GPU. In DeepEP's kernels
# (csrc/kernels/internode_ll.cu) the send loops over tokens strided by the grid (one SM per
# token up to ceil(E / ceil(E / SMs)) of them: 128 SMs for 256 experts on a 132-SM GPU), and
# the receive works per (local expert, source rank) pair, polling its count and copying its few
# tokens: most of their time is fixed (launch, the per-expert counts and flags), with a part
# that grows with tokens. That shape is measured where all of the kernels' work is SM work
# (one node: the warps copy every token over NVLink themselves, no NIC): aiconfigurator-core
# 0.12.0, systems/data/h100_sxm/comm/sglang/0.5.6.post2/wideep_deepep_ll_perf.parquet,
# DeepEP low-latency dispatch + combine latency on one H100 node, hidden 7168, top-8, 256
# experts (us, by tokens per GPU). Over RDMA the NIC moves the remote copies, so the real
# slope on the SMs is at most this one. Beyond the last point, time grows in proportion.
LOW_LATENCY_TOKEN_CURVE_US = (
    (1, 28.5), (2, 28.7), (4, 29.8), (8, 30.4), (16, 35.9), (32, 45.1), (64, 68.8),
    (128, 112.2), (256, 203.1), (512, 391.9), (1024, 763.7), (2048, 1490.3),
)  # fmt: skip


_CURVE_TOKENS, _CURVE_US = np.array(LOW_LATENCY_TOKEN_CURVE_US, dtype=float).T
_CURVE_AT_TRACE_US = dict(LOW_LATENCY_TOKEN_CURVE_US)[LOW_LATENCY_TRACE_TOKENS]


def hook_kernel_scale(tokens_per_gpu: float) -> float:
    """The low-latency send and receive kernels' time at `tokens_per_gpu` over their time at
    the trace's 64 (`LOW_LATENCY_TOKEN_CURVE_US`)."""
    if tokens_per_gpu > _CURVE_TOKENS[-1]:
        return float(_CURVE_US[-1] * tokens_per_gpu / _CURVE_TOKENS[-1]) / _CURVE_AT_TRACE_US
    return float(np.interp(tokens_per_gpu, _CURVE_TOKENS, _CURVE_US)) / _CURVE_AT_TRACE_US


# rank ops that run once per step whatever the layers (not split by two-batch overlap)
_ONCE_PER_STEP = frozenset({"dense_mlp", "lm_head", "sampling", "mtp_draft", "mtp_prefill"})
_MOE_LAYER_OPS = frozenset({"moe_gate", "moe_shared"})


def moe_layer_share(model: ModelSpec, op: str) -> float:
    """Share of a rank op's step time spent in the MoE layers (what two-batch overlap
    splits): all of the router and shared experts, none of the dense MLP, the head, the
    sampling and the MTP passes, and moe_layers / num_layers of every per-layer op (attention,
    elementwise, TP all-reduce)."""
    if op in _MOE_LAYER_OPS:
        return 1.0
    if op in _ONCE_PER_STEP:
        return 0.0
    return model.moe_layers / model.num_layers


EXACT_LAYERS = 6  # the schedule is periodic (period <= 2 layers) well before this


@dataclass(frozen=True)
class Stage:
    """One micro-batch's op times per MoE layer: its attention and rank work, the expert
    dispatch, the routed experts, the combine."""

    attn_s: float
    dispatch_s: float
    moe_s: float
    combine_s: float
    send_s: float = 0.0  # compute-stream time of each exchange's send kernel
    recv_s: float = 0.0  # compute-stream time of each exchange's receive kernel


def two_batch_step(
    attn_s: float, dispatch_s: float, moe_s: float, combine_s: float, layers: int
) -> float:
    """Makespan of `layers` MoE layers of two equal micro-batches, each op time given per
    micro-batch per layer."""
    same = Stage(attn_s, dispatch_s, moe_s, combine_s)
    return micro_batch_step(same, same, layers)


def micro_batch_step(first: Stage, second: Stage, layers: int) -> float:
    """Makespan of `layers` MoE layers of two micro-batches.

    The schedule is a max-plus recurrence that settles into a repeating pattern within a few
    layers: the first EXACT_LAYERS are scheduled op by op and the rest extrapolated by the
    two-layer period (equal to the full schedule to rounding; a test checks it).
    """
    if layers <= EXACT_LAYERS:
        return _schedule(first, second, layers)
    before = _schedule(first, second, EXACT_LAYERS - 2)
    last = _schedule(first, second, EXACT_LAYERS)
    return last + (layers - EXACT_LAYERS) * (last - before) / 2


def _schedule(first: Stage, second: Stage, layers: int) -> float:
    """Op-by-op list schedule of the two micro-batches over `layers` layers. A send kernel
    runs on the compute stream right after the op that feeds its exchange, a receive kernel
    once the exchange's transfer has landed, before the op that reads it."""
    batches = (first, second)
    compute_free = comm_free = 0.0
    ready = [0.0, 0.0]  # when each micro-batch's previous combine landed
    recv_first = False  # the first layer has no combine to receive
    for _ in range(layers):
        a_end = [0.0, 0.0]
        for b, mb in enumerate(batches):
            compute_free = max(compute_free, ready[b]) + (mb.recv_s if recv_first else 0.0)
            compute_free += mb.attn_s + mb.send_s
            a_end[b] = compute_free
        d_end = [0.0, 0.0]
        for b, mb in enumerate(batches):
            comm_free = max(comm_free, a_end[b]) + mb.dispatch_s
            d_end[b] = comm_free
        m_end = [0.0, 0.0]
        for b, mb in enumerate(batches):
            compute_free = max(compute_free, d_end[b]) + mb.recv_s + mb.moe_s + mb.send_s
            m_end[b] = compute_free
        for b, mb in enumerate(batches):
            comm_free = max(comm_free, m_end[b]) + mb.combine_s
            ready[b] = comm_free
        recv_first = True
    for b, mb in enumerate(batches):  # the last combine's receive
        if mb.recv_s > 0:
            compute_free = max(compute_free, ready[b]) + mb.recv_s
            ready[b] = compute_free
    return max(ready)


def comm_time(ops: dict[str, OpTime]) -> float:
    """EP communication in a step: what two-batch overlap can hide."""
    return sum(ops[n].seconds for n in ("ep_dispatch", "ep_combine") if n in ops)


@dataclass(frozen=True)
class MicroBatch:
    """One micro-batch's priced stages over a step: its slowest rank's own work in the MoE
    layers, one layer's routed experts (with their SiLU), its EP dispatch and combine over all
    MoE layers, and the busiest sender's tokens per GPU (what DeepEP's send and receive kernels
    work through)."""

    rank_s: float
    routed_s: float
    dispatch_s: float
    combine_s: float
    sender_tokens_per_gpu: float


def moe_layers_s(model: ModelSpec, ops: dict[str, OpTime]) -> float:
    """A rank's time in its MoE layers (`moe_layer_share`): what two-batch overlap splits."""
    return sum(t.seconds * moe_layer_share(model, name) for name, t in ops.items())


def overlapped_s(
    first: MicroBatch, second: MicroBatch, *, once_s: float, layers: int, decode_only: bool
) -> float:
    """A step's time with two-batch overlap: the work that runs once (`once_s`: dense layers,
    head, MTP passes) and the two micro-batches scheduled layer by layer over `layers` MoE
    layers on a compute and a communication stream (`micro_batch_step`).

    In a decode-only step DeepEP's low-latency kernels run in hook mode: their send and receive
    kernels sit on the compute stream, the rest of each exchange is transfer. In a step with
    prefill the normal kernels hold `NORMAL_KERNEL_SM_SHARE` of the SMs, and the compute that
    overlaps them runs on the rest."""
    slow = 1.0 if decode_only else 1.0 / (1.0 - NORMAL_KERNEL_SM_SHARE)
    stages = []
    for mb in (first, second):
        dispatch, combine_s = mb.dispatch_s / layers, mb.combine_s / layers
        send = recv = 0.0
        if decode_only and dispatch + combine_s > 0:
            scale = hook_kernel_scale(mb.sender_tokens_per_gpu)
            send, recv = LOW_LATENCY_SEND_S * scale, LOW_LATENCY_RECV_S * scale
            dispatch, combine_s = (max(t - send - recv, 0.0) for t in (dispatch, combine_s))
        stages.append(
            Stage(mb.rank_s / layers * slow, dispatch, mb.routed_s * slow, combine_s, send, recv)
        )
    return once_s + micro_batch_step(stages[0], stages[1], layers)
