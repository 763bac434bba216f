"""FLOPs and HBM (or link) bytes of one op, in the convention calibration tables are stored in.

Each op's count is its type's (`sim.cost.ops`); `op_work` reads an op from its attributes.

A table's efficiency at a grid point is roofline(work)/latency, so the cost model reproduces a
measured point exactly only when it counts that op's work the way the table did: call `op_work`
for both. Conventions (H heads, d_c latent, d_s RoPE, d_k/d_v per-head q/k and value widths,
P = causal pairs from `sim.cost.mla.causal_pairs`):

- mla_decode: attention core only, P = batch * pairs(s_q, kv_len); bytes = the cache read once
  plus bf16 queries in and latent outputs.
- mla_prefill / mla_prefill_chunked: expanded attention core only (the kv_b up-projection is a
  `gemm`); bytes = bf16 q, K, V read and output written.
- mla_extend_absorb / mla_extend_expand: whole paths (`sim.cost.mla.absorb_flops/expand_flops`),
  projections included; bytes add the projection weights.
- gemm / bmm / moe_*: 2mkn; operands in the compute dtype (FP8: 1 byte), outputs BF16.
- moe (a fused layer on one EP GPU): the balanced share of its token-expert pairs, tokens x
  topk / moe_ep, through gate+up and down over intermediate / moe_tp, and every local
  expert's weights read once; the load skew the table was measured at is in its latency only.
- dsa_attn_*: the kernel visits all `topk` index slots per query token (the published FlashMLA
  sparse latencies are flat below kv_len = topk).
- dsa_indexer_*: FP8 keys plus an fp32 scale per cached token; decode scores each of its
  next_n query tokens against the whole cache, prefill scores causal pairs.
- ep_dispatch: FP8 tokens plus one fp32 scale per 128 values; ep_combine: BF16. Bytes are per
  rank, sent over the op's bottleneck link; comm ops have no FLOPs. Copies per token as
  `comm.ep_copies` counts them at the bottleneck link's speed, in DeepEP's benchmark layout
  (8 H800s per node, a token on at most 4 nodes).
- all_reduce (ring): 2(g-1)/g x bytes; all_gather, all_to_all: (g-1)/g x bytes, where `bytes` is
  the full tensor (all ranks' shares).
"""

from __future__ import annotations

from collections.abc import Mapping

from sim.cost.attention_ops import (
    DsaAttnDecode,
    DsaAttnPrefill,
    DsaIndexerDecode,
    DsaIndexerPrefill,
    MlaDecode,
    MlaExtendAbsorb,
    MlaExtendExpand,
    MlaPrefill,
    MlaPrefillChunked,
    kv_bytes_per_token,
)
from sim.cost.ops import (
    BF16,
    DEEPEP_GPUS_PER_NODE,
    DEEPEP_MAX_NODES,
    DEEPEP_NVLINK_SPEEDUP,
    FP8_SCALE_GROUP,
    AllGather,
    AllReduce,
    AllToAll,
    Bmm,
    Elementwise,
    EpCombine,
    EpDispatch,
    Gemm,
    Moe,
    MoeDown,
    MoeUp,
    Op,
    elem_bytes,
)
from sim.specs.model import MlaSpec
from sim.specs.profile import OP_ATTRIBUTES, check_op

__all__ = [
    "BF16",
    "DEEPEP_GPUS_PER_NODE",
    "DEEPEP_MAX_NODES",
    "DEEPEP_NVLINK_SPEEDUP",
    "FP8_SCALE_GROUP",
    "kv_bytes_per_token",
    "op_work",
]

# each table op's type: every op of the vocabulary has its work convention by construction
# (tests/cost/test_ops.py checks the two name the same ops)
OP_TYPES: Mapping[str, type[Op]] = {
    t.op: t
    for t in (Gemm, Bmm, MoeUp, MoeDown, Moe, Elementwise, EpDispatch, EpCombine, AllGather,
              AllToAll, AllReduce, DsaIndexerDecode, DsaIndexerPrefill, MlaDecode, DsaAttnDecode,
              DsaAttnPrefill, MlaPrefill, MlaPrefillChunked, MlaExtendAbsorb, MlaExtendExpand)
}  # fmt: skip


def op_work(
    op: str, attrs: Mapping[str, object], *, mla_spec: MlaSpec | None = None, dtype: str = "bf16"
) -> tuple[float, float]:
    """(FLOPs, bytes) of `op` at `attrs` (every attribute of `OP_ATTRIBUTES[op]`).

    Raises ValueError for an unknown op, a missing or non-numeric attribute, an unknown dtype,
    or an MLA op without `mla_spec`.
    """
    check_op(op)
    missing = [a for a in OP_ATTRIBUTES[op] if a not in attrs]
    if missing:
        raise ValueError(f"{op} work needs attributes {missing}")
    elem = elem_bytes(dtype)
    return OP_TYPES[op].of(attrs).work(mla_spec, elem)
