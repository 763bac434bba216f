"""Per-layer ops of one attention rank (one GPU of it), priced for the requests it runs.

Token-level ops (projection GEMMs, shared experts, dense MLPs, lm_head) scale with the rank's
tokens; sequence-level ops (attention cores, the DSA indexer, linear-attention state) with each
request's own context. Routed experts and communication are unit-level (see `serving.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from sim.cost import mla
from sim.cost.batch import OpTime
from sim.cost.dispatch import ABSORB, EXPAND, EXPAND_CHUNKED, SPARSE_ABSORB
from sim.cost.memory import INDEXER_BYTES_PER_TOKEN_LAYER, WEIGHT_BYTES
from sim.cost.pricing import Pricer, combine
from sim.specs.model import ModelSpec

ACT = 2.0  # BF16 activations


@dataclass(frozen=True, kw_only=True)
class RankSegments:
    """The request segments one attention rank runs in a step, with their MLA paths."""

    q: NDArray[np.float64]
    k: NDArray[np.float64]
    is_decode: NDArray[np.bool_]
    path: NDArray[np.int8]

    @property
    def tokens(self) -> float:
        return float(self.q.sum())


@dataclass(frozen=True, kw_only=True)
class RankContext:
    """What every op of a rank needs to know about the model and deployment."""

    model: ModelSpec
    heads: int  # attention heads on one GPU of the rank
    tp: int  # attention TP
    moe_tp: int
    dense_split: int
    weight_dtype: str
    kv_dtype: str
    kv_bytes_layer: float  # one token, one layer, one copy
    topk: int  # DSA top-k (0: dense)

    @property
    def compute_dtype(self) -> str:
        return "bf16" if self.weight_dtype == "bf16" else "fp8"


def gemm(pr: Pricer, c: RankContext, m: float, k: int, n: int) -> OpTime:
    """One projection GEMM: m tokens x (k -> n) with the deployment's weight dtype."""
    if m <= 0:
        return OpTime(seconds=0.0, source="roofline")
    wb = WEIGHT_BYTES[c.weight_dtype]
    return pr.op(
        "gemm",
        {"k": k, "n": n, "dtype": c.compute_dtype},
        {"m": m},
        2.0 * m * k * n,
        k * n * wb + m * (k + n) * ACT,
        c.compute_dtype,
    )


def mla_layer(pr: Pricer, c: RankContext, s: RankSegments) -> dict[str, OpTime]:
    """One MLA layer on one GPU of the rank: projections, absorbed and expanded attention."""
    mm = c.model.mla_spec
    d, h = c.model.hidden_size, c.heads
    qk, t = mm.qk_nope_head_dim + mm.qk_rope_head_dim, s.tokens
    q_in = mm.q_lora_rank or d
    proj = [
        gemm(pr, c, t, q_in, h * qk),
        gemm(pr, c, t, d, mm.kv_lora_rank + mm.qk_rope_head_dim),
        gemm(pr, c, t, h * mm.v_head_dim, d),
    ]
    if mm.q_lora_rank:
        proj.append(gemm(pr, c, t, d, mm.q_lora_rank))
    ops: dict[str, OpTime] = {"attn_proj": combine(*proj)}

    absorbed = (s.path == ABSORB) | (s.path == SPARSE_ABSORB)
    q_abs = float(s.q[absorbed].sum())
    bmm_flops = q_abs * mla.projection_flops_per_token(mm, h)
    bmm_bytes = h * mm.kv_lora_rank * (mm.qk_nope_head_dim + mm.v_head_dim) * ACT
    ops["mla_bmm"] = pr.op(
        "mla_bmm", {"heads": h}, {"m": max(q_abs, 1.0)}, bmm_flops, bmm_bytes if q_abs else 0.0
    )

    cores: list[OpTime] = []
    for sparse in (False, True):
        sel = absorbed & (s.path == (SPARSE_ABSORB if sparse else ABSORB))
        if not sel.any():
            continue
        q, k, dec = s.q[sel], s.k[sel], s.is_decode[sel]
        pairs = mla.sparse_pairs(q, k, c.topk) if sparse else mla.causal_pairs(q, k)
        attended = np.minimum(k, c.topk) if sparse else k
        flops = float(np.sum(pairs)) * mla.absorb_pair_flops(mm, h)
        bytes_ = float(attended.sum()) * c.kv_bytes_layer
        n = float(sel.sum())
        s_q = int(q[dec].max()) if dec.any() else int(q.max())
        op = ("dsa_attn_decode" if dec.all() else "dsa_attn_prefill") if sparse else "mla_decode"
        cores.append(
            pr.op(
                op,
                {"s_q": s_q, "kv_dtype": c.kv_dtype, "heads": h},
                {"batch": n, "kv_len": float(attended.mean())},
                flops,
                bytes_,
            )
        )
        if sparse:
            ops["dsa_indexer"] = dsa_indexer(pr, c, q, k, dec)
    ops["attn_decode"] = combine(*cores)

    exp = (s.path == EXPAND) | (s.path == EXPAND_CHUNKED)
    if exp.any():
        q, k = s.q[exp], s.k[exp]
        kv_b = gemm(
            pr, c, float(k.sum()), mm.kv_lora_rank, h * (mm.qk_nope_head_dim + mm.v_head_dim)
        )
        flops = float(np.sum(mla.causal_pairs(q, k))) * mla.expand_pair_flops(mm, h)
        bytes_ = float(k.sum()) * h * (qk + mm.v_head_dim) * ACT
        core = pr.op(
            "mla_prefill",
            {"heads": h},
            {"seq_len": float(q.sum()), "prefix_len": float((k - q).mean()) + 1.0},
            flops,
            bytes_,
        )
        ops["attn_prefill"] = combine(kv_b, core)
    return ops


def dsa_indexer(
    pr: Pricer,
    c: RankContext,
    q: NDArray[np.float64],
    k: NDArray[np.float64],
    dec: NDArray[np.bool_],
) -> OpTime:
    """Indexer scoring of every cached token (FP8) plus its small projections."""
    x = c.model.dsa
    assert x is not None
    pair_flops = 2.0 * x.index_n_heads * x.index_head_dim
    flops = float(np.sum(q * k)) * pair_flops
    bytes_ = float(k.sum()) * INDEXER_BYTES_PER_TOKEN_LAYER
    op = "dsa_indexer_decode" if dec.all() else "dsa_indexer_prefill"
    point = (
        {"batch": float(len(q)), "s_kv": float(k.mean())}
        if dec.all()
        else {"s_q": float(q.sum()), "s_kv": float(k.mean())}
    )
    score = pr.op(op, {"next_n": int(q.max())}, point, flops, bytes_, "fp8")
    mm = c.model.mla_spec
    t = float(q.sum())
    proj = combine(
        gemm(pr, c, t, mm.q_lora_rank or c.model.hidden_size, x.index_n_heads * x.index_head_dim),
        gemm(pr, c, t, c.model.hidden_size, x.index_head_dim + x.index_n_heads),
    )
    return combine(score, proj)


def gqa_layer(pr: Pricer, c: RankContext, s: RankSegments) -> dict[str, OpTime]:
    """One GQA layer: QKV/O projections and the attention core (roofline unless profiled)."""
    g = c.model.gqa_spec
    d, h, t = c.model.hidden_size, c.heads, s.tokens
    kvh = max(1, g.num_kv_heads // c.tp)
    proj = combine(gemm(pr, c, t, d, (h + 2 * kvh) * g.head_dim), gemm(pr, c, t, h * g.head_dim, d))
    kv_b = (1.0 if c.kv_dtype == "fp8" else 2.0) * 2 * kvh * g.head_dim
    ops = {"attn_proj": proj}
    for name, sel in (("attn_decode", s.is_decode), ("attn_prefill", ~s.is_decode)):
        if sel.any():
            pairs = float(np.sum(mla.causal_pairs(s.q[sel], s.k[sel])))
            ops[name] = pr.op(
                f"gqa_{name.removeprefix('attn_')}",
                {"heads": h},
                {"batch": float(sel.sum()), "kv_len": float(s.k[sel].mean())},
                pairs * 4.0 * h * g.head_dim,
                float(s.k[sel].sum()) * kv_b,
            )
    return ops


def linear_attention_layer(pr: Pricer, c: RankContext, s: RankSegments) -> OpTime:
    """One KDA layer: projections plus the recurrent-state update, state read and written."""
    la = c.model.linear_attention
    assert la is not None
    h = la.num_heads // c.tp
    t, d = s.tokens, c.model.hidden_size
    proj = combine(gemm(pr, c, t, d, 4 * h * la.head_dim), gemm(pr, c, t, h * la.head_dim, d))
    state = h * la.head_dim * la.head_dim * la.state_bytes_per_elem
    core = pr.op(
        "kda",
        {"heads": h},
        {"batch": float(len(s.q)), "tokens": max(t, 1.0)},
        t * 4.0 * h * la.head_dim * la.head_dim,
        2.0 * state * len(s.q),
    )
    return combine(proj, core)


def ffn_rank_ops(pr: Pricer, c: RankContext, tokens: float) -> dict[str, OpTime]:
    """Per-layer rank-side FFN work: MoE gate and shared experts; and one dense MLP layer."""
    moe, d = c.model.moe, c.model.hidden_size
    shared_i = moe.n_shared_experts * moe.moe_intermediate_size // c.moe_tp
    dense_i = moe.dense_intermediate_size // c.dense_split
    return {
        "moe_gate": gemm(pr, c, tokens, d, moe.n_routed_experts),
        "moe_shared": combine(
            gemm(pr, c, tokens, d, 2 * shared_i), gemm(pr, c, tokens, shared_i, d)
        )
        if shared_i
        else OpTime(seconds=0.0, source="roofline"),
        "dense_mlp": combine(gemm(pr, c, tokens, d, 2 * dense_i), gemm(pr, c, tokens, dense_i, d)),
    }
