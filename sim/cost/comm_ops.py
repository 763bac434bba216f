"""Communication of one step: volumes from `sim.cost.comm`, priced on links.

TP all-reduce after attention (and after the FFN when experts split the same way), the gather
and scatter between DP attention and TP experts or unit-wide dense layers, and the EP dispatch /
combine of DeepEP.

TensorRT-LLM moves a MoE layer's tokens its own way on Hopper (`trtllm_moe_comm`): with
attention TP the routed and shared outputs are summed and all-reduced over the TP group like a
TP FFN's (`Deepseekv3MoE.forward`, tensorrt_llm/_torch/models/modeling_deepseekv3.py); with
attention DP its CUTLASS MoE all-gathers every rank's BF16 hidden states with their top-k ids
and weights and reduce-scatters the outputs (`CutlassFusedMoE.forward_chunk` and
`reducescatter_or_allreduce`, tensorrt_llm/_torch/modules/fused_moe/fused_moe_cutlass.py): its
all-to-all needs multi-node NVLink (GB200) or the opt-in `TRTLLM_CAN_USE_DEEP_EP`, so an H100
or H200 node runs no DeepEP kernel.

EP dispatch and combine run in lock-step over the whole unit, so a layer's exchange lasts as
long as the GPU that moves the most bytes takes: the busiest sender (the rank with the most
tokens in the step, whatever its attention time) or the busiest receiver (under skewed routing,
the EP GPU that receives the most token-expert pairs, `sim.cost.routed.receive_skew`).

A step with prefill runs DeepEP's normal kernels. They have no published figure at decode
batch sizes, and their bandwidth price (one copy per distinct destination, no fixed cost) falls
below the low-latency price of the same decode tokens; but a mixed step still moves every decode
token and runs outside the decode CUDA graph. So a mixed step's exchange costs no less than the
low-latency exchange of its decode tokens alone, op by op.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

from sim.cost import comm
from sim.cost.comm_load import CommLoad
from sim.cost.layer_ops import Memo, kept
from sim.cost.ops import AllGather, AllReduce, EpCombine, EpDispatch
from sim.cost.overlap import LOW_LATENCY_TOKEN_CURVE_US
from sim.cost.pricing import Pricer
from sim.cost.rate import ZERO, OpTime, combine, scale
from sim.cost.routed import receive_skew
from sim.specs.deployment import Deployment
from sim.specs.gpu import GpuSpec
from sim.specs.model import ModelSpec


def ep_tokens_per_gpu(m: ModelSpec, d: Deployment, load: CommLoad) -> float:
    """Tokens per GPU whose DeepEP traffic sets a layer's dispatch and combine time.

    The busiest sender sends `sender_tokens / attn_tp`. The busiest receiver gets the mean GPU's
    share times `receive_skew`, expressed in the same per-sender tokens; under even routing it
    equals the mean sender, so DeepEP's published points (equal tokens per rank, uniform random
    routing) come back unchanged.
    """
    send = load.sender_tokens / d.attn_tp
    if load.unit_tokens <= 0:
        return send
    receive = load.unit_tokens / d.gpus * receive_skew(m, d, load.unit_tokens)
    return max(send, receive)


def layer_comm_ops(
    pr: Pricer, m: ModelSpec, d: Deployment, g: GpuSpec, load: CommLoad, memo: Memo | None = None
) -> dict[str, OpTime]:
    """One layer's communication: TP all-reduce (one attention layer, plus the FFN's when
    experts split the same way), DP-attention gather to TP experts, EP dispatch/combine
    (DeepEP low-latency kernels for decode-only passes, normal kernels otherwise, never below
    the low-latency exchange of the pass's decode tokens); with a `memo`, each exchange kernel
    kept by what sets it (`ep_exchange`)."""
    ops: dict[str, OpTime] = {}
    if d.attn_tp > 1:
        ops["tp_allreduce"] = tp_allreduce(pr, m, d, g, load.rank_tokens)
    if d.engine == "trtllm" and d.ep > 1:
        ops.update(trtllm_moe_comm(pr, m, d, g, load))
        return ops
    if d.moe_tp > d.attn_tp:  # DP attention feeding TP experts: gather, then scatter back
        ops["dp_gather"] = dp_gather(pr, m, d, g, load, d.moe_tp).op
    if d.ep > 1:
        ops.update(ep_exchange(pr, m, d, g, load, memo))
        if not load.decode_only and load.decode_unit_tokens > 0:
            floor = ep_exchange(pr, m, d, g, load.decode_part(), memo)
            for op, low in floor.items():
                if low.seconds > ops[op].seconds:
                    ops[op] = low
    return ops


@dataclass(frozen=True)
class DpGather:
    """The gather of DP-attention ranks' hidden states into one buffer on every GPU of a group,
    and the scatter of the summed outputs back: `rows` in the buffer, `op` both collectives."""

    rows: float
    op: OpTime


def dp_gather(
    pr: Pricer, m: ModelSpec, d: Deployment, g: GpuSpec, load: CommLoad, gpus: int
) -> DpGather:
    """SGLang's DP gather over `gpus` GPUs (`gpus / attn_tp` DP ranks) in one layer, with its
    buffer laid out one of two ways (`DpPaddingMode`):

    - max-len: every rank's rows padded to the largest rank's, gathered by an all-gather and
      returned by a reduce-scatter (the same bytes);
    - sum-len: the ranks' rows back to back, zeros elsewhere, gathered by an all-reduce and
      returned by another.

    A pass with a prefill chunk uses sum-len; a decode pass whichever moves fewer bytes.
    """
    h, dp = m.hidden_size, gpus // d.attn_tp
    largest = load.sender_tokens
    # the group holding the busiest rank; its other ranks at the unit's mean
    others = (load.unit_tokens - largest) / max(d.gpus // d.attn_tp - 1, 1)
    total = largest + (dp - 1) * others
    max_len = load.decode_only and 2 * total > largest * dp
    rows = largest * dp if max_len else total
    if dp <= 1 or rows <= 0:
        return DpGather(rows=rows, op=ZERO)
    link = comm.group_link(g, gpus, d.gpus_per_node)
    buffer = rows * h * comm.BF16
    if max_len:  # the reduce-scatter back moves the all-gather's bytes
        op: AllGather = AllGather(bytes=buffer, gpus=dp, link=link.name, calls=2)
    else:
        op = AllReduce(bytes=buffer, gpus=gpus, link=link.name, calls=2)
    return DpGather(rows, pr.link(op, link.bytes_per_s))


def tp_allreduce(pr: Pricer, m: ModelSpec, d: Deployment, g: GpuSpec, tokens: float) -> OpTime:
    """One layer's TP all-reduce of an attention rank's `tokens` hidden states: after attention,
    and after the FFN when experts split the same way. It sits on that rank's own path."""
    if d.attn_tp <= 1:
        return ZERO
    calls = 2 if 1 < d.moe_tp <= d.attn_tp or trtllm_moe_allreduce(d) else 1
    buffer = tokens * m.hidden_size * comm.BF16
    op = AllReduce(bytes=buffer, gpus=d.attn_tp, link="nvlink", calls=calls)
    link = comm.group_link(g, d.attn_tp, d.gpus_per_node)
    return pr.link(op, link.bytes_per_s)


ROUTING_BYTES_PER_PICK = 4.0 + 4.0  # an int32 expert id and an FP32 weight per top-k pick


def trtllm_moe_allreduce(d: Deployment) -> bool:
    """Whether TensorRT-LLM all-reduces a MoE layer's output over the attention TP group: with
    attention TP over the whole unit, whatever the experts' EP x TP split (module docstring)."""
    return d.engine == "trtllm" and d.attn_tp > 1 and d.attn_dp == 1


def trtllm_moe_comm(
    pr: Pricer, m: ModelSpec, d: Deployment, g: GpuSpec, load: CommLoad
) -> dict[str, OpTime]:
    """One MoE layer's token movement under TensorRT-LLM's CUTLASS MoE with EP (module
    docstring). Attention TP: none beyond the TP all-reduce, which sums the MoE's output
    (`tp_allreduce` counts it). Attention DP: every GPU gathers all ranks' tokens (BF16 hidden
    state, top-k expert ids as int32 and weights as FP32, as many rows as the ranks hold: the
    all-gather is sized by each rank's own count) and reduce-scatters the BF16 outputs; the
    reduce-scatter moves the same bytes per GPU as the all-gather of the outputs, so it is
    priced at the all-gather's rate, as `dp_gather` prices SGLang's scatter."""
    if trtllm_moe_allreduce(d) or load.unit_tokens <= 0:
        return {}
    h, topk, gpus = m.hidden_size, m.moe.experts_per_token, d.gpus
    link = comm.group_link(g, gpus, d.gpus_per_node)
    rows = load.unit_tokens
    gather_row = h * comm.BF16 + topk * ROUTING_BYTES_PER_PICK
    times = [
        pr.link(AllGather(bytes=rows * row_bytes, gpus=gpus, link=link.name), link.bytes_per_s)
        for row_bytes in (gather_row, h * comm.BF16)
    ]
    return {"dp_gather": combine(*times)}


def ep_exchange(
    pr: Pricer, m: ModelSpec, d: Deployment, g: GpuSpec, load: CommLoad, memo: Memo | None = None
) -> dict[str, OpTime]:
    """One layer's DeepEP dispatch and combine of `load`: low-latency kernels for a decode-only
    pass, normal kernels otherwise. Both follow from the tokens per GPU and the mode alone,
    by which a `memo` keeps them (a mixed step's whole load rarely repeats; the busiest
    sender's rounded tokens do)."""
    per_gpu = ep_tokens_per_gpu(m, d, load)
    mode = "low_latency" if load.decode_only else "normal"
    return {
        kind.op: kept(
            memo,
            ("ep", kind.op, per_gpu, mode),
            partial(_ep_kernel, pr, m, d, g, kind, per_gpu, mode),
        )
        for kind in (EpDispatch, EpCombine)
    }


def _ep_kernel(
    pr: Pricer,
    m: ModelSpec,
    d: Deployment,
    g: GpuSpec,
    kind: type[EpDispatch],
    per_gpu: float,
    mode: str,
) -> OpTime:
    """One DeepEP kernel (`kind`) moving `per_gpu` tokens per GPU in `mode`."""
    link = comm.ep_link(g, d)
    moe, h = m.moe, m.hidden_size
    cap = moe.groups_per_token if moe.expert_groups > 1 else None
    copies = comm.ep_copies(
        moe.experts_per_token,
        d.ep,
        comm.ep_per_node(d),
        mode,
        max_nodes=cap,
        nvlink_speedup=g.nvlink_gb_s / g.nic_gb_s,
    )
    # the table's shape; the step's own tokens, each sent `copies` times as this unit lays out
    table_op = kind(max(per_gpu, 1.0), d.ep, mode, link.name, h, moe.experts_per_token)
    runs = replace(table_op, tokens_per_rank=per_gpu, copies=copies)
    t = pr.link(table_op, link.bytes_per_s, runs=runs)
    return _with_latency_floor(pr, table_op, t, per_gpu) if mode == "low_latency" else t


# DeepEP's published low-latency figures (its README: H800, CX7 RDMA) are all taken at one
# batch, 128 tokens per rank, so a price read from them grows in proportion to tokens. The
# kernels also spend a part that does not grow with tokens (launch, the per-expert counts and
# flags, the receiver's polling): aiconfigurator-core's one-node DeepEP low-latency table
# (`sim.cost.overlap.LOW_LATENCY_TOKEN_CURVE_US`) puts dispatch + combine at 28.5 us for one
# token per GPU, against 112.2 us at 128. Over RDMA that floor is no lower; it is taken as
# that, split evenly between the two kernels.
DEEPEP_LL_BENCHMARK_TOKENS = 128.0
DEEPEP_LL_FLOOR_S = LOW_LATENCY_TOKEN_CURVE_US[0][1] * 1e-6 / 2


def _with_latency_floor(pr: Pricer, op: EpDispatch, t: OpTime, tokens_per_gpu: float) -> OpTime:
    """A low-latency kernel's time read from DeepEP's 128-token figures, as a fixed floor plus
    a part in proportion to tokens instead of all in proportion: `DEEPEP_LL_FLOOR_S` x
    (1 - tokens / 128) more (less above 128 tokens). Only where a published table prices it
    at one batch (a roofline price has its own fixed part, and a table timed over a range of
    tokens per GPU, as aiconfigurator-core's are, holds the kernels' own)."""
    if len(pr.table_axis(op, "tokens_per_rank")) != 1 or t.seconds <= 0:
        return t
    share = tokens_per_gpu / DEEPEP_LL_BENCHMARK_TOKENS
    seconds = max(t.seconds + DEEPEP_LL_FLOOR_S * (1.0 - share), DEEPEP_LL_FLOOR_S)
    return replace(t, seconds=seconds)


def unit_comm_ops(
    pr: Pricer, m: ModelSpec, d: Deployment, g: GpuSpec, load: CommLoad, memo: Memo | None = None
) -> dict[str, OpTime]:
    """One step's unit-wide communication: the gather and the EP exchange in every MoE layer.
    The TP all-reduce is each attention rank's own (`tp_allreduce`, priced with its work), so
    the slowest rank is found with it. `memo`: as `layer_comm_ops` keeps the exchange."""
    per_layer = layer_comm_ops(pr, m, d, g, load, memo)
    return {op: scale(t, m.moe_layers) for op, t in per_layer.items() if op != "tp_allreduce"}


def draft_comm(
    pr: Pricer, m: ModelSpec, d: Deployment, g: GpuSpec, load: CommLoad, drafts: int
) -> OpTime:
    """The MTP draft passes' communication: each pass runs one MoE layer (the MTP module) over
    the decode requests, with its TP all-reduce, gather and EP exchange."""
    return scale(combine(*layer_comm_ops(pr, m, d, g, load).values()), drafts)
