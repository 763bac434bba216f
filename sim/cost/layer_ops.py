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
from sim.cost.dispatch import ABSORB, EXPAND, EXPAND_CHUNKED, SPARSE_ABSORB
from sim.cost.memory import WEIGHT_BYTES, indexer_bytes_per_token_layer
from sim.cost.ops import Bmm, Gemm, elem_bytes
from sim.cost.pricing import Pricer
from sim.cost.rate import ZERO, OpTime, combine
from sim.specs.model import ModelSpec

ACT = 2.0  # BF16 activations


@dataclass(frozen=True, kw_only=True)
class RankSegments:
    """The request segments one attention rank runs in a step, with their MLA paths."""

    q: NDArray[np.float64]
    k: NDArray[np.float64]
    is_decode: NDArray[np.bool_]
    path: NDArray[np.int8]
    samples: NDArray[np.bool_] | None = None  # segments that compute logits (None: all)

    @property
    def tokens(self) -> float:
        return float(self.q.sum())

    @property
    def sampling_prefills(self) -> int:
        """Prefill segments that complete their prompt this step (one logits row each)."""
        done = ~self.is_decode if self.samples is None else ~self.is_decode & self.samples
        return int(done.sum())

    def split_in_two(self) -> tuple[RankSegments, RankSegments]:
        """The two micro-batches of two-batch overlap, of about equal tokens: decode requests
        alternate by context length (the first takes the odd one out); each prefill chunk is
        cut in two at half its tokens (the second takes the odd token; the first part ends
        where the second starts, and only the second samples), keeping its MLA path."""
        dec = np.flatnonzero(self.is_decode)
        dec = dec[np.argsort(self.k[dec], kind="stable")]
        pre = np.flatnonzero(~self.is_decode)
        first_q = np.floor(self.q[pre] / 2)
        second_q = self.q[pre] - first_q
        sampled = np.ones(len(self.q), dtype=bool) if self.samples is None else self.samples
        parts = []
        for d, q, k, smp in (
            (dec[0::2], first_q, self.k[pre] - second_q, np.zeros(len(pre), dtype=bool)),
            (dec[1::2], second_q, self.k[pre], sampled[pre]),
        ):
            kept = q > 0
            sel = pre[kept]
            parts.append(
                RankSegments(
                    q=np.concatenate([self.q[d], q[kept]]),
                    k=np.concatenate([self.k[d], k[kept]]),
                    is_decode=np.concatenate([self.is_decode[d], self.is_decode[sel]]),
                    path=np.concatenate([self.path[d], self.path[sel]]),
                    samples=np.concatenate([sampled[d], smp[kept]]),
                )
            )
        return parts[0], parts[1]


@dataclass(frozen=True, kw_only=True)
class RankContext:
    """What every op of a rank needs to know about the model and deployment."""

    model: ModelSpec
    heads: int  # attention heads on one GPU of the rank
    tp: int  # attention TP
    shared_tp: int  # GPUs one shared expert is split over (`overheads.shared_expert_tp`)
    dense_split: int
    weight_dtype: str
    kv_dtype: str
    kv_bytes_layer: float  # one token, one layer, one copy
    topk: int  # DSA top-k (0: dense)
    chunk_tokens: int  # prefix chunk when the expand path runs chunked
    topk_in_indexer: bool = False  # the profile's indexer tables time the top-k selection too

    @property
    def compute_dtype(self) -> str:
        return compute_dtype(self.weight_dtype)


def compute_dtype(weight_dtype: str) -> str:
    """The dtype a GEMM with these weights computes in: FP8 (or FP4) weights take FP8
    activations, quantised by the kernel in front of them (`sim.cost.elementwise`)."""
    return "bf16" if weight_dtype == "bf16" else "fp8"


def weight_excess_bytes(weight_dtype: str) -> float:
    """Weight bytes per value beyond `op_work`'s convention (one value of the compute dtype):
    FP4's packing and scales against FP8; FP8's block scales are inside its tables' latencies."""
    compute = compute_dtype(weight_dtype)
    if weight_dtype == compute:
        return 0.0
    return WEIGHT_BYTES[weight_dtype] - (1.0 if compute == "fp8" else ACT)


def gemm(
    pr: Pricer, c: RankContext, m: float, k: int, n: int, weight_dtype: str | None = None
) -> OpTime:
    """One GEMM: m tokens x (k -> n) with the deployment's weight dtype, or `weight_dtype` for
    the weights SGLang keeps in BF16 whatever the checkpoint (lm_head, router, MTP eh_proj).

    Work is `ops.Gemm`'s (activations in the compute dtype, outputs BF16), so a table point
    comes back exactly."""
    if m <= 0:
        return ZERO
    w = weight_dtype or c.weight_dtype
    attrs, dtype = {"m": m, "k": k, "n": n}, compute_dtype(w)
    flops, bytes_ = Gemm(m=float(m), k=float(k), n=float(n)).work(None, elem_bytes(dtype))
    bytes_ += k * n * weight_excess_bytes(w)
    return pr.op("gemm", attrs, flops, bytes_, dtype)


def absorb_bmm(pr: Pricer, c: RankContext, tokens: float) -> OpTime:
    """W_UK folded into the queries and W_UV applied to the latent outputs (per-head BF16 bmm)."""
    mm, h = c.model.mla_spec, c.heads
    if tokens <= 0:
        return ZERO
    parts = []
    for k, n in ((mm.qk_nope_head_dim, mm.kv_lora_rank), (mm.kv_lora_rank, mm.v_head_dim)):
        flops, bytes_ = Bmm(m=tokens, k=float(k), n=float(n), batch=float(h)).work(None, ACT)
        parts.append(pr.op("bmm", {"m": tokens, "k": k, "n": n, "batch": h}, flops, bytes_))
    return combine(*parts)


def mla_layer(pr: Pricer, c: RankContext, s: RankSegments) -> dict[str, OpTime]:
    """One MLA layer on one GPU of the rank: projections, absorbed and expanded attention."""
    mm = c.model.mla_spec
    d, h = c.model.hidden_size, c.heads
    qk, t = mm.qk_nope_head_dim + mm.qk_rope_head_dim, s.tokens
    q_in = mm.q_lora_rank or d
    kv_a = mm.kv_lora_rank + mm.qk_rope_head_dim
    # with a q LoRA, SGLang runs q_a and kv_a as one GEMM over the same input
    # (`fused_qkv_a_proj_with_mqa`, d -> q_lora_rank + d_c + d_s: 7168 -> 2112 for DeepSeek-V3),
    # one weight read and one launch; without one, q is projected from d on its own
    proj = [
        gemm(pr, c, t, q_in, h * qk),
        gemm(pr, c, t, d, (mm.q_lora_rank or 0) + kv_a),
        gemm(pr, c, t, h * mm.v_head_dim, d),
    ]
    if mm.output_gate:  # Kimi K3: sigmoid(x W_g) gates the heads' outputs before o_proj
        proj.append(gemm(pr, c, t, d, h * mm.v_head_dim))
    ops: dict[str, OpTime] = {"attn_proj": combine(*proj)}

    absorbed = (s.path == ABSORB) | (s.path == SPARSE_ABSORB)
    dense_dec = (s.path == ABSORB) & s.is_decode
    sparse = s.path == SPARSE_ABSORB
    ops["mla_bmm"] = absorb_bmm(pr, c, float(s.q[dense_dec | sparse].sum()))
    cores: list[OpTime] = []
    prefill: list[OpTime] = []
    if dense_dec.any():
        cores.append(_absorbed_decode(pr, c, s.q[dense_dec], s.k[dense_dec]))
    if sparse.any():  # decode segments' sparse cores under attn_decode, extends' under prefill
        for decode, out in ((True, cores), (False, prefill)):
            sel = sparse & (s.is_decode == decode)
            if sel.any():
                out.append(_sparse(pr, c, s.q[sel], s.k[sel], decode))
        ops["dsa_indexer"] = dsa_indexer(pr, c, s.q[sparse], s.k[sparse], s.is_decode[sparse])
    ops["attn_decode"] = combine(*cores)

    ext_abs = absorbed & ~s.is_decode & ~sparse
    if ext_abs.any():  # short extends after a short prefix (SGLang MLA for extend)
        q, k = s.q[ext_abs], s.k[ext_abs]
        attrs = {"new_tokens": float(q.mean()), "prefix_len": float((k - q).mean()), "heads": h}
        flops = float(np.sum(mla.absorb_flops(mm, q, k, heads=h)))
        weights = ACT * h * mm.kv_lora_rank * (mm.qk_nope_head_dim + mm.v_head_dim)  # W_UK, W_UV
        bytes_ = float(k.sum()) * c.kv_bytes_layer + weights
        prefill.append(pr.op("mla_extend_absorb", attrs, flops, bytes_))
    for code, op in ((EXPAND, "mla_prefill"), (EXPAND_CHUNKED, "mla_prefill_chunked")):
        sel = s.path == code
        if not sel.any():
            continue
        q, k = s.q[sel], s.k[sel]
        prefill.append(
            gemm(pr, c, float(k.sum()), mm.kv_lora_rank, h * (mm.qk_nope_head_dim + mm.v_head_dim))
        )  # kv_b up-projection
        attrs = {"seq_len": float(q.mean()), "prefix_len": float((k - q).mean()), "heads": h}
        if code == EXPAND_CHUNKED:
            attrs["chunk_tokens"] = c.chunk_tokens
        flops = float(np.sum(mla.causal_pairs(q, k))) * mla.expand_pair_flops(mm, h)
        bytes_ = ACT * h * float(np.sum((q + k) * qk + (k + q) * mm.v_head_dim))
        prefill.append(pr.op(op, attrs, flops, bytes_))
    if prefill:
        ops["attn_prefill"] = combine(*prefill)
    return ops


def _latent_query_output_bytes(c: RankContext) -> float:
    """Per query token: its BF16 latent-space query (d_c + d_s) in and latent output (d_c) out."""
    mm = c.model.mla_spec
    return ACT * c.heads * (2 * mm.kv_lora_rank + mm.qk_rope_head_dim)


def _absorbed_decode(
    pr: Pricer, c: RankContext, q: NDArray[np.float64], k: NDArray[np.float64]
) -> OpTime:
    mm, h = c.model.mla_spec, c.heads
    attrs = {
        "batch": float(len(q)),
        "kv_len": float(k.mean()),
        "s_q": int(q.max()),
        "kv_dtype": c.kv_dtype,
        "heads": h,
    }
    flops = float(np.sum(mla.causal_pairs(q, k))) * mla.absorb_pair_flops(mm, h)
    qo = _latent_query_output_bytes(c)
    return pr.op("mla_decode", attrs, flops, float(k.sum()) * c.kv_bytes_layer + q.sum() * qo)


def _sparse(
    pr: Pricer, c: RankContext, q: NDArray[np.float64], k: NDArray[np.float64], decode: bool
) -> OpTime:
    """Absorbed attention over the indexer's top-k (the kernel visits all top-k slots:
    `mla.sparse_slots`), for decode segments or for extend/prefill segments."""
    mm, h = c.model.mla_spec, c.heads
    slots = float(np.sum(mla.sparse_slots(q, c.topk)))
    flops = slots * mla.absorb_pair_flops(mm, h)
    bytes_ = slots * c.kv_bytes_layer + float(q.sum()) * _latent_query_output_bytes(c)
    if decode:
        attrs: dict[str, object] = {
            "batch": float(len(q)),
            "kv_len": float(k.mean()),
            "s_q": int(q.max()),
            "kv_dtype": c.kv_dtype,
            "topk": c.topk,
            "heads": h,
        }
        return pr.op("dsa_attn_decode", attrs, flops, bytes_)
    attrs = {"s_q": float(q.sum()), "s_kv": float(k.mean()), "topk": c.topk, "heads": h}
    return pr.op("dsa_attn_prefill", attrs, flops, bytes_)


def dsa_indexer(
    pr: Pricer,
    c: RankContext,
    q: NDArray[np.float64],
    k: NDArray[np.float64],
    dec: NDArray[np.bool_],
) -> OpTime:
    """Indexer scoring of every cached token (FP8) plus its small projections.

    Decode segments score each of their S query tokens against the whole cache (the decode
    tables' convention); extend/prefill segments score causally, as `op_work` counts them.
    """
    x = c.model.dsa
    assert x is not None
    width = x.index_n_heads * x.index_head_dim
    key_bytes = indexer_bytes_per_token_layer(c.model)
    dims = {"index_heads": x.index_n_heads, "index_dim": x.index_head_dim}
    scores = []
    for decode, sel in ((True, dec), (False, ~dec)):
        if not sel.any():
            continue
        qs, ks = q[sel], k[sel]
        bytes_ = float(ks.sum()) * key_bytes + float(qs.sum()) * width
        if decode:
            flops = 2.0 * float(np.sum(qs * ks)) * width
            attrs: dict[str, object] = {
                "batch": float(len(qs)),
                "s_kv": float(ks.mean()),
                "next_n": int(qs.max()),
                **dims,
            }
            scores.append(pr.op("dsa_indexer_decode", attrs, flops, bytes_, "fp8"))
        else:
            flops = 2.0 * float(np.sum(mla.causal_pairs(qs, ks))) * width
            attrs = {"s_q": float(qs.sum()), "s_kv": float(ks.mean()), **dims}
            scores.append(pr.op("dsa_indexer_prefill", attrs, flops, bytes_, "fp8"))
    if not c.topk_in_indexer:
        scores.append(_topk_selection(pr, c, q, k, dec))
    mm, t = c.model.mla_spec, float(q.sum())
    proj = combine(
        gemm(pr, c, t, mm.q_lora_rank or c.model.hidden_size, width),
        gemm(pr, c, t, c.model.hidden_size, x.index_head_dim + x.index_n_heads),
    )
    return combine(*scores, proj)


def _topk_selection(
    pr: Pricer,
    c: RankContext,
    q: NDArray[np.float64],
    k: NDArray[np.float64],
    dec: NDArray[np.bool_],
) -> OpTime:
    """DSA's top-k selection over the indexer's scores: one read of each query token's fp32
    logits (every cached token in decode and verify, the causal ones in extend/prefill) and a
    write of its `topk` int32 indices, as SGLang's fused top-k kernel makes one pass over
    each row. No kernel table covers it (the published indexer figures time the logits
    kernel only), so it is priced by its bytes at the profile's memory efficiency."""
    rows = float(np.sum(np.where(dec, q * k, mla.causal_pairs(q, k))))
    bytes_ = 4.0 * rows + 4.0 * float(q.sum()) * min(c.topk, float(k.max()))
    attrs = {"tokens": float(q.sum()), "kv_len": float(k.mean()), "topk": c.topk}
    return pr.op("dsa_topk", attrs, 0.0, bytes_)


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
                {"heads": h, "batch": float(sel.sum()), "kv_len": float(s.k[sel].mean())},
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
        {"heads": h, "batch": float(len(s.q)), "tokens": max(t, 1.0)},
        t * 4.0 * h * la.head_dim * la.head_dim,
        2.0 * state * len(s.q),
    )
    return combine(proj, core)


def ffn_rank_ops(
    pr: Pricer, c: RankContext, tokens: float, *, dense: bool = True
) -> dict[str, OpTime]:
    """Per-layer rank-side FFN work: MoE gate and shared experts; and, with `dense`, one dense
    MLP layer (the MTP module has none: it is a MoE layer)."""
    moe, d = c.model.moe, c.model.hidden_size
    shared_i = moe.n_shared_experts * moe.moe_intermediate_size // c.shared_tp
    ops = {
        "moe_gate": gemm(pr, c, tokens, d, moe.n_routed_experts, "bf16"),  # BF16 in checkpoints
        "moe_shared": combine(
            gemm(pr, c, tokens, d, 2 * shared_i), gemm(pr, c, tokens, shared_i, d)
        )
        if shared_i
        else ZERO,
    }
    if dense:
        dense_i = moe.dense_intermediate_size // c.dense_split
        ops["dense_mlp"] = combine(
            gemm(pr, c, tokens, d, 2 * dense_i), gemm(pr, c, tokens, dense_i, d)
        )
    return ops
