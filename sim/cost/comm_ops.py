"""Communication of one step on the critical rank: volumes from `sim.cost.comm`, priced on links.

TP all-reduce after attention (and after the FFN when experts split the same way), the gather
and scatter between DP attention and TP experts, and the EP dispatch / combine of DeepEP.
"""

from __future__ import annotations

from sim.cost import comm
from sim.cost.batch import OpTime
from sim.cost.pricing import Pricer, scale
from sim.specs.deployment import Deployment
from sim.specs.gpu import GpuSpec
from sim.specs.model import ModelSpec


def unit_comm_ops(
    pr: Pricer, m: ModelSpec, d: Deployment, g: GpuSpec, rank_tokens: float, decode_only: bool
) -> dict[str, OpTime]:
    """One step's communication for a rank of `rank_tokens` tokens, every layer: TP all-reduce,
    DP-attention gather to TP experts, EP dispatch/combine (DeepEP low-latency kernels for
    decode-only steps, normal kernels otherwise)."""
    h, layers = m.hidden_size, m.num_layers
    ops: dict[str, OpTime] = {}
    if d.attn_tp > 1:  # after attention, and after the FFN when experts split the same way
        tensor = rank_tokens * h * comm.BF16
        per_layer = comm.allreduce_bytes(rank_tokens, h, d.attn_tp)
        per_layer *= 2 if 1 < d.moe_tp <= d.attn_tp else 1
        attrs = {"bytes": tensor, "gpus": d.attn_tp, "link": "nvlink"}
        link = comm.group_link(g, d.attn_tp, d.gpus_per_node)
        ops["tp_allreduce"] = scale(
            pr.link("all_reduce", attrs, per_layer, link.bytes_per_s), layers
        )
    if d.moe_tp > d.attn_tp:  # DP attention feeding TP experts: gather, then scatter back
        group = d.moe_tp // d.attn_tp
        gathered = comm.allgather_bytes(rank_tokens, h, group)
        link = comm.group_link(g, d.moe_tp, d.gpus_per_node)
        attrs = {"bytes": rank_tokens * h * comm.BF16 * group, "gpus": group, "link": link.name}
        ops["dp_gather"] = scale(
            pr.link("all_gather", attrs, 2 * gathered, link.bytes_per_s), m.moe_layers
        )
    if d.ep > 1:
        per_gpu = rank_tokens / d.attn_tp
        link = comm.ep_link(g, d)
        moe = m.moe
        mode = "low_latency" if decode_only else "normal"
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
            b = fn(per_gpu, h, copies)
            ops[op] = scale(pr.link(op, attrs, b, link.bytes_per_s), m.moe_layers)
    return ops
