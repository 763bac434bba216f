"""FLOPs and HBM (or link) bytes of one op, in the convention calibration tables are stored in.

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

from sim.cost import mla
from sim.cost.comm import ep_copies
from sim.specs.model import MlaSpec
from sim.specs.profile import OP_ATTRIBUTES, check_op

BF16 = 2.0
# The layout of DeepEP's published benchmarks: 8 H800s per node (NVLink ~160 GB/s, one
# ~50 GB/s NIC each), a token's experts on at most 4 nodes.
DEEPEP_GPUS_PER_NODE, DEEPEP_MAX_NODES, DEEPEP_NVLINK_SPEEDUP = 8, 4, 160.0 / 50.0
FP8_SCALE_GROUP = 128  # values per fp32 scale in block-scaled FP8 layouts


def kv_bytes_per_token(m: MlaSpec, kv_dtype: str) -> float:
    """Latent cache bytes per token per layer: BF16, or FlashMLA's FP8 layout (656 B for V3)."""
    if kv_dtype == "bf16":
        return BF16 * (m.kv_lora_rank + m.qk_rope_head_dim)
    if kv_dtype == "fp8":
        return m.kv_lora_rank * (1.0 + 4.0 / FP8_SCALE_GROUP) + BF16 * m.qk_rope_head_dim
    raise ValueError(f"unknown kv_dtype {kv_dtype!r}: use 'bf16' or 'fp8'")


def _elem(dtype: str) -> float:
    if dtype not in ("bf16", "fp8"):
        raise ValueError(f"unknown compute dtype {dtype!r}: use 'bf16' or 'fp8'")
    return 1.0 if dtype == "fp8" else BF16


def _mla(op: str, mla_spec: MlaSpec | None) -> MlaSpec:
    if mla_spec is None:
        raise ValueError(f"{op} work needs the MLA shape: pass mla=")
    return mla_spec


def op_work(
    op: str, attrs: Mapping[str, object], *, mla_spec: MlaSpec | None = None, dtype: str = "bf16"
) -> tuple[float, float]:
    """(FLOPs, bytes) of `op` at `attrs` (every attribute of `OP_ATTRIBUTES[op]`).

    Raises ValueError for an unknown op, a missing attribute, or an MLA op without `mla_spec`.
    """
    check_op(op)
    missing = [a for a in OP_ATTRIBUTES[op] if a not in attrs]
    if missing:
        raise ValueError(f"{op} work needs attributes {missing}")

    def f(name: str) -> float:
        return _num(attrs, name)

    e = _elem(dtype)
    if op in ("gemm", "bmm"):
        m, k, n = f("m"), f("k"), f("n")
        groups = f("batch") if op == "bmm" else 1.0
        return groups * 2 * m * k * n, groups * (e * (m * k + k * n) + BF16 * m * n)
    if op in ("moe_up", "moe_down"):
        experts, hidden, inter = f("num_local_experts"), f("hidden"), f("intermediate")
        tokens = experts * f("tokens_per_expert")
        k, n = (hidden, 2 * inter) if op == "moe_up" else (inter, hidden)
        return 2 * tokens * k * n, e * (experts * k * n + tokens * k) + BF16 * tokens * n
    if op == "moe":
        pairs = f("tokens") * f("topk") / f("moe_ep")
        inter, hidden = f("intermediate") / f("moe_tp"), f("hidden")
        weights = f("experts") / f("moe_ep") * 3 * hidden * inter
        return 6 * pairs * hidden * inter, e * (weights + pairs * hidden) + BF16 * pairs * hidden
    if op == "elementwise":
        return 0.0, 2 * BF16 * f("tokens") * f("width")
    if op in ("ep_dispatch", "ep_combine"):
        ep = int(f("ep"))
        per_node = ep if attrs["link"] == "nvlink" else DEEPEP_GPUS_PER_NODE
        copies = ep_copies(
            int(f("topk")),
            ep,
            per_node,
            str(attrs["mode"]),
            max_nodes=DEEPEP_MAX_NODES,
            nvlink_speedup=DEEPEP_NVLINK_SPEEDUP,
        )
        values = f("tokens_per_rank") * copies * f("hidden")
        per_value = 1.0 + 4.0 / FP8_SCALE_GROUP if op == "ep_dispatch" else BF16
        return 0.0, values * per_value
    if op in ("all_reduce", "all_gather", "all_to_all"):
        g = f("gpus")
        share = (g - 1) / g if g > 1 else 0.0
        return 0.0, (2.0 if op == "all_reduce" else 1.0) * share * f("bytes")
    if op in ("dsa_indexer_decode", "dsa_indexer_prefill"):
        width = f("index_heads") * f("index_dim")
        key_bytes = f("s_kv") * (f("index_dim") + 4.0)
        if op == "dsa_indexer_decode":
            b, s = f("batch"), f("next_n")
            return 2 * b * s * f("s_kv") * width, b * key_bytes + b * s * width
        pairs = float(mla.causal_pairs(f("s_q"), f("s_kv")))
        return 2 * pairs * width, key_bytes + f("s_q") * width
    return _attention_work(op, attrs, _mla(op, mla_spec))


def _num(attrs: Mapping[str, object], name: str) -> float:
    value = attrs[name]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"attribute {name!r} must be a number, got {value!r}")
    return float(value)


def _attention_work(op: str, attrs: Mapping[str, object], m: MlaSpec) -> tuple[float, float]:
    def f(name: str) -> float:
        return _num(attrs, name)

    h = f("heads")
    dc, ds, dk, dv = m.kv_lora_rank, m.qk_rope_head_dim, m.qk_nope_head_dim, m.v_head_dim
    qo_latent = BF16 * h * ((dc + ds) + dc)  # bf16 query in latent space, latent output
    if op == "mla_decode":
        b, s, kv = f("batch"), f("s_q"), f("kv_len")
        pairs = b * float(mla.causal_pairs(s, kv))
        cache = b * kv * kv_bytes_per_token(m, str(attrs["kv_dtype"]))
        return pairs * mla.absorb_pair_flops(m, int(h)), cache + b * s * qo_latent
    if op in ("dsa_attn_decode", "dsa_attn_prefill"):
        queries = f("batch") * f("s_q") if op == "dsa_attn_decode" else f("s_q")
        slots = queries * f("topk")
        cache = kv_bytes_per_token(m, str(attrs.get("kv_dtype", "bf16")))
        flops = slots * mla.absorb_pair_flops(m, int(h))
        return flops, slots * cache + queries * qo_latent
    if op in ("mla_prefill", "mla_prefill_chunked"):
        q = f("seq_len")
        k = f("prefix_len") + q
        flops = float(mla.causal_pairs(q, k)) * mla.expand_pair_flops(m, int(h))
        return flops, BF16 * h * ((q + k) * (dk + ds) + (k + q) * dv)
    q = f("new_tokens")
    k = f("prefix_len") + q
    cache = kv_bytes_per_token(m, "bf16")
    weights = BF16 * h * dc * (dk + dv)
    if op == "mla_extend_absorb":
        flops = float(mla.absorb_flops(m, q, k, heads=int(h)))
        return flops, float(mla.absorb_bytes(m, k, kv_bytes_per_token=cache)) + weights
    if op == "mla_extend_expand":
        flops = float(mla.expand_flops(m, q, k, heads=int(h)))
        nbytes = float(mla.expand_bytes(m, k, heads=int(h), kv_bytes_per_token=cache))
        return flops, nbytes + weights
    raise AssertionError(f"op {op!r} has no work convention")
