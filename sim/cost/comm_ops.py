"""Communication of one step: volumes from `sim.cost.comm`, priced on links.

TP all-reduce after attention (and after the FFN when experts split the same way), the gather
and scatter between DP attention and TP experts, and the EP dispatch / combine of DeepEP.

EP dispatch and combine run in lock-step over the whole unit, so a layer's exchange lasts as
long as the GPU that moves the most bytes takes: the busiest sender (the rank with the most
tokens in the step, whatever its attention time) or the busiest receiver (under skewed routing,
the EP GPU that receives the most token-expert pairs, `sim.cost.routed.receive_skew`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.cost import comm
from sim.cost.batch import BatchShape, OpTime
from sim.cost.pricing import Pricer, combine, scale
from sim.cost.routed import receive_skew
from sim.specs.deployment import Deployment
from sim.specs.gpu import GpuSpec
from sim.specs.model import ModelSpec


@dataclass(frozen=True, kw_only=True)
class CommLoad:
    """Tokens that size one forward pass's communication.

    `rank_tokens`: the critical rank's tokens (its own TP all-reduce sits on its path);
    `sender_tokens`: the most tokens any attention rank holds (DeepEP and the DP-attention gather
    wait for it); `unit_tokens`: all ranks' tokens together (what the experts receive).
    """

    rank_tokens: float
    sender_tokens: float
    unit_tokens: float
    decode_only: bool


def comm_loads(
    batch: BatchShape, tokens_r: np.ndarray, crit: int, *, mtp: bool
) -> tuple[CommLoad, CommLoad | None]:
    """What sizes a step's unit-wide work (`tokens_r`: tokens per rank, `crit`: the critical
    rank), and its MTP draft passes' (one token per decode request; None without MTP)."""
    load = CommLoad(
        rank_tokens=float(tokens_r[crit]),
        sender_tokens=float(tokens_r.max()),
        unit_tokens=float(tokens_r.sum()),
        decode_only=bool(batch.is_decode.all()),
    )
    if not mtp or not batch.is_decode.any():
        return load, None
    dec_r = np.bincount(batch.rank[batch.is_decode], minlength=batch.num_ranks)
    draft = CommLoad(
        rank_tokens=float(dec_r[crit]),
        sender_tokens=float(dec_r.max()),
        unit_tokens=float(dec_r.sum()),
        decode_only=True,  # draft passes run decode requests only: low-latency kernels
    )
    return load, draft


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
    pr: Pricer, m: ModelSpec, d: Deployment, g: GpuSpec, load: CommLoad
) -> dict[str, OpTime]:
    """One layer's communication: TP all-reduce (one attention layer, plus the FFN's when
    experts split the same way), DP-attention gather to TP experts, EP dispatch/combine
    (DeepEP low-latency kernels for decode-only passes, normal kernels otherwise)."""
    h = m.hidden_size
    ops: dict[str, OpTime] = {}
    if d.attn_tp > 1:
        t = load.rank_tokens
        per_layer = comm.allreduce_bytes(t, h, d.attn_tp)
        per_layer *= 2 if 1 < d.moe_tp <= d.attn_tp else 1
        attrs = {"bytes": t * h * comm.BF16, "gpus": d.attn_tp, "link": "nvlink"}
        link = comm.group_link(g, d.attn_tp, d.gpus_per_node)
        ops["tp_allreduce"] = pr.link("all_reduce", attrs, per_layer, link.bytes_per_s)
    if d.moe_tp > d.attn_tp:  # DP attention feeding TP experts: gather, then scatter back
        t, group = load.sender_tokens, d.moe_tp // d.attn_tp  # gathers pad to the largest rank
        gathered = comm.allgather_bytes(t, h, group)
        link = comm.group_link(g, d.moe_tp, d.gpus_per_node)
        attrs = {"bytes": t * h * comm.BF16 * group, "gpus": group, "link": link.name}
        ops["dp_gather"] = pr.link("all_gather", attrs, 2 * gathered, link.bytes_per_s)
    if d.ep > 1:
        per_gpu = ep_tokens_per_gpu(m, d, load)
        link = comm.ep_link(g, d)
        moe = m.moe
        mode = "low_latency" if load.decode_only else "normal"
        cap = moe.groups_per_token if moe.expert_groups > 1 else None
        copies = comm.remote_copies(
            moe.experts_per_token, d.ep, d.gpus_per_node, mode, max_nodes=cap
        )
        attrs = {
            "tokens_per_rank": max(per_gpu, 1.0),
            "ep": d.ep,
            "mode": mode,
            "link": link.name,
            "hidden": h,
            "topk": moe.experts_per_token,
        }
        for op, fn in (
            ("ep_dispatch", comm.dispatch_bytes),
            ("ep_combine", comm.combine_bytes),
        ):
            ops[op] = pr.link(op, attrs, fn(per_gpu, h, copies), link.bytes_per_s)
    return ops


def unit_comm_ops(
    pr: Pricer, m: ModelSpec, d: Deployment, g: GpuSpec, load: CommLoad
) -> dict[str, OpTime]:
    """One step's communication, every layer: the TP all-reduce in every layer, the gather and
    the EP exchange in every MoE layer."""
    per_layer = layer_comm_ops(pr, m, d, g, load)
    return {
        op: scale(t, m.num_layers if op == "tp_allreduce" else m.moe_layers)
        for op, t in per_layer.items()
    }


def draft_comm(
    pr: Pricer, m: ModelSpec, d: Deployment, g: GpuSpec, load: CommLoad, drafts: int
) -> OpTime:
    """The MTP draft passes' communication: each pass runs one MoE layer (the MTP module) over
    the decode requests, with its TP all-reduce, gather and EP exchange."""
    return scale(combine(*layer_comm_ops(pr, m, d, g, load).values()), drafts)
