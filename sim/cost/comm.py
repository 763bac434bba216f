"""Communication volumes per layer and their link: NVLink inside a node, RDMA across nodes.

- TP all-reduce of the hidden states (ring: each GPU moves 2 (t-1)/t of the buffer).
- EP dispatch (FP8 activations + scales) and combine (BF16) of each token to its top-k experts.
- All-gather / reduce-scatter when MoE TP spans more GPUs than attention TP (DP attention + TP MoE).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.specs.deployment import Deployment
from sim.specs.gpu import GpuSpec

FP8_DISPATCH_BYTES_PER_ELEM = 1.0 + 4.0 / 128  # FP8 values + one fp32 scale per 128
BF16 = 2.0


@dataclass(frozen=True, kw_only=True)
class Link:
    name: str  # "nvlink" | "rdma"
    bytes_per_s: float


def group_link(gpu: GpuSpec, group_gpus: int, gpus_per_node: int) -> Link:
    """The slowest link a collective over `group_gpus` GPUs crosses."""
    if group_gpus <= gpus_per_node:
        return Link(name="nvlink", bytes_per_s=gpu.nvlink_gb_s * 1e9)
    return Link(name="rdma", bytes_per_s=gpu.nic_gb_s * 1e9)


def allreduce_bytes(tokens: float, hidden: int, group: int) -> float:
    """Bytes each GPU sends in a ring all-reduce of `tokens` BF16 hidden states."""
    if group <= 1:
        return 0.0
    return 2.0 * (group - 1) / group * tokens * hidden * BF16


def allgather_bytes(tokens: float, hidden: int, group: int) -> float:
    """Bytes each GPU receives gathering every peer's `tokens` BF16 hidden states."""
    if group <= 1:
        return 0.0
    return (group - 1) * tokens * hidden * BF16


def remote_copies(
    top_k: int, ep: int, gpus_per_node: int, mode: str, max_nodes: int | None = None
) -> float:
    """Copies of one token that leave its GPU for expert parallelism.

    Low-latency kernels (decode) send the token to each selected expert's GPU: top_k (ep-1)/ep.
    Normal kernels (prefill) across nodes send it once per distinct remote node over RDMA and
    forward it inside the node over NVLink: with `nodes` nodes and top_k uniform picks,
    nodes (1 - (1 - 1/nodes)^top_k) distinct nodes (at most `max_nodes` under group-limited
    routing), (nodes - 1)/nodes of them remote.
    """
    if ep <= 1:
        return 0.0
    nodes = ep // gpus_per_node
    if mode == "normal" and nodes > 1:
        distinct = nodes * (1.0 - (1.0 - 1.0 / nodes) ** top_k)
        if max_nodes is not None:
            distinct = min(distinct, float(max_nodes))
        return distinct * (nodes - 1) / nodes
    return top_k * (ep - 1) / ep


def dispatch_bytes(tokens: float, hidden: int, copies: float) -> float:
    """Bytes one GPU sends dispatching its tokens' `copies` each (FP8 + scales)."""
    return tokens * copies * hidden * FP8_DISPATCH_BYTES_PER_ELEM


def combine_bytes(tokens: float, hidden: int, copies: float) -> float:
    """Bytes one GPU receives combining expert outputs back (BF16)."""
    return tokens * copies * hidden * BF16


def ep_link(gpu: GpuSpec, d: Deployment) -> Link:
    return group_link(gpu, d.ep, d.gpus_per_node)
