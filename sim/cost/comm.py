"""Communication links and EP copy counts: NVLink inside a node, RDMA across nodes.

The bytes a collective moves are its op's work (`sim.cost.ops`: `AllReduce`, `AllGather`,
`EpDispatch`, `EpCombine`); this module gives the link each one crosses and the copies per token
a DeepEP exchange sends (`ep_copies`).
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


def distinct_hits(bins: float, picks: float) -> float:
    """Expected number of distinct bins that `picks` uniform random picks land in."""
    return bins * (1.0 - (1.0 - 1.0 / bins) ** picks) if bins > 1 else min(picks, 1.0)


def ep_copies(
    top_k: int,
    ep: int,
    ep_per_node: int,
    mode: str,
    *,
    max_nodes: int | None = None,
    nvlink_speedup: float = 1.0,
) -> float:
    """Copies of one token the EP exchange moves per GPU, counted at its bottleneck link's speed
    (`ep_link`): across nodes, a copy over NVLink counts 1/`nvlink_speedup` of an RDMA copy.

    - Low-latency kernels (decode) send one copy per selected expert on another GPU:
      top_k (ep_per_node - 1)/ep to peers in the node over NVLink, top_k (ep - ep_per_node)/ep
      to other nodes over RDMA. The same warps issue both, so their times add.
    - Normal kernels (prefill) send a token once per distinct destination. Inside one node:
      one copy per distinct other GPU. Across nodes: one RDMA copy per distinct remote node
      (the experts lie in `max_nodes` chosen nodes under group-limited routing), and the
      receiving GPU forwards it over NVLink once per distinct other GPU of that node holding
      one of its experts; the RDMA and NVLink stages run as a pipeline, so the slower sets the
      time.

    Distinct counts assume uniform routing (`distinct_hits`). Counted this way DeepEP's
    published latencies, EP8 to EP256, all sit at 0.5-1 of their links' bandwidth.
    """
    if ep <= 1:
        return 0.0
    per_node = max(1, min(ep_per_node, ep))
    nodes = ep // per_node
    if mode == "low_latency":
        nvlink = top_k * (per_node - 1) / ep
        return nvlink if nodes == 1 else top_k * (ep - per_node) / ep + nvlink / nvlink_speedup
    if nodes == 1:
        return distinct_hits(ep, top_k) * (ep - 1) / ep
    hit_nodes = distinct_hits(min(nodes, max_nodes or nodes), top_k)
    rdma = hit_nodes * (nodes - 1) / nodes
    gpus_per_hit = distinct_hits(per_node, top_k / hit_nodes) * (per_node - 1) / per_node
    return max(rdma, hit_nodes * gpus_per_hit / nvlink_speedup)


def ep_per_node(d: Deployment) -> int:
    """GPUs of one EP group in each node: the unit's nodes share the group evenly."""
    return max(1, d.ep // d.nodes)


def ep_link(gpu: GpuSpec, d: Deployment) -> Link:
    """The EP exchange's bottleneck link: NVLink when the group sits in one node, else RDMA."""
    if d.ep <= ep_per_node(d):
        return Link(name="nvlink", bytes_per_s=gpu.nvlink_gb_s * 1e9)
    return Link(name="rdma", bytes_per_s=gpu.nic_gb_s * 1e9)
