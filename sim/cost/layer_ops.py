"""Per-layer ops of one attention rank (one GPU of it), priced for the requests it runs.

Token-level ops (projection GEMMs, shared experts, dense MLPs, lm_head) scale with the rank's
tokens; sequence-level ops (attention cores, the DSA indexer, linear-attention state) with each
request's own context. Routed experts and communication are unit-level (see `serving.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from sim.cost.attention_ops import (
    DsaAttnDecode,
    DsaAttnPrefill,
    DsaIndexerDecode,
    DsaIndexerPrefill,
    DsaTopk,
    GqaDecode,
    GqaPrefill,
    Kda,
    MlaDecode,
    MlaExtendAbsorb,
    MlaPrefill,
    MlaPrefillChunked,
    Segments,
)
from sim.cost.dispatch import ABSORB, EXPAND, EXPAND_CHUNKED, SPARSE_ABSORB
from sim.cost.memory import WEIGHT_BYTES, indexer_bytes_per_token_layer
from sim.cost.ops import Bmm, Gemm
from sim.cost.pricing import Pricer
from sim.cost.rate import ZERO, OpTime, combine
from sim.specs.model import ModelSpec
from sim.specs.profile import Profile

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
    def expanded_tokens(self) -> float:
        """Cached tokens the expand-path segments up-project (kv_b runs over each)."""
        expand = (self.path == EXPAND) | (self.path == EXPAND_CHUNKED)
        return float(np.sum(self.k[expand]))

    @property
    def sampling_prefills(self) -> int:
        """Prefill segments that complete their prompt this step (one logits row each)."""
        done = ~self.is_decode if self.samples is None else ~self.is_decode & self.samples
        return int(done.sum())


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
    engine: str | None = None  # the serving engine (`Deployment.engine`)

    @property
    def compute_dtype(self) -> str:
        return compute_dtype(self.weight_dtype)


def indexer_times_topk(profile: Profile | None) -> bool:
    """Whether the profile's DSA indexer tables time the top-k selection with the logits
    (`kernels_calib`'s `torch_bmm_topk`), so that it is not priced again; the published
    `fp8_mqa_logits` tables time the logits kernel only."""
    tables = [] if profile is None else profile.tables
    return any(t.op.startswith("dsa_indexer") and "topk" in t.impl for t in tables)


def compute_dtype(weight_dtype: str) -> str:
    """The dtype a GEMM with these weights computes in: FP8 (or FP4) weights take FP8
    activations, quantised by the kernel in front of them (`sim.cost.elementwise`)."""
    return "bf16" if weight_dtype == "bf16" else "fp8"


def weight_excess_bytes(weight_dtype: str) -> float:
    """Weight bytes per value beyond the op types' convention (one value of the compute dtype):
    FP4's packing and scales against FP8; FP8's block scales are inside its tables' latencies."""
    compute = compute_dtype(weight_dtype)
    if weight_dtype == compute:
        return 0.0
    return WEIGHT_BYTES[weight_dtype] - (1.0 if compute == "fp8" else ACT)


# a memo of priced pieces: the time stored for a key, or the computed one stored (the caller's
# keys are complete for one pricer and context: `sim.cost.mixed_rank`, `sim.cost.serving`)
Memo = Callable[[tuple[object, ...], Callable[[], OpTime]], OpTime]


V = TypeVar("V")


def kept(
    memo: Callable[[tuple[object, ...], Callable[[], V]], V] | None,
    key: tuple[object, ...],
    price: Callable[[], V],
) -> V:
    """`price()`, through `memo` by `key` where there is one (a `Memo` of priced pieces, or a
    memo of whole ops dicts, `sim.cost.unit_work.OpsMemo`)."""
    return price() if memo is None else memo(key, price)


def gemm(
    pr: Pricer, c: RankContext, m: float, k: int, n: int, weight_dtype: str | None = None
) -> OpTime:
    """One GEMM: m tokens x (k -> n) with the deployment's weight dtype, or `weight_dtype` for
    the weights SGLang keeps in BF16 whatever the checkpoint (lm_head, router, MTP eh_proj).
    Work is `ops.Gemm`'s, so a table point comes back exactly."""
    if m <= 0:
        return ZERO
    w = weight_dtype or c.weight_dtype
    op = Gemm(m=m, k=k, n=n, weight_excess=weight_excess_bytes(w))
    return pr.price(op, compute_dtype(w))


def absorb_bmm(pr: Pricer, c: RankContext, tokens: float) -> OpTime:
    """W_UK folded into the queries and W_UV applied to the latent outputs (per-head BF16 bmm)."""
    mm, h = c.model.mla_spec, c.heads
    if tokens <= 0:
        return ZERO
    pairs = ((mm.qk_nope_head_dim, mm.kv_lora_rank), (mm.kv_lora_rank, mm.v_head_dim))
    return combine(*(pr.price(Bmm(m=tokens, k=k, n=n, batch=h)) for k, n in pairs))


def mla_layer(
    pr: Pricer,
    c: RankContext,
    s: RankSegments,
    projections: bool = True,
    memo: Memo | None = None,
) -> dict[str, OpTime]:
    """One MLA layer on one GPU of the rank: projections (`attn_proj`, unless not
    `projections`), absorbed and expanded attention. With a `memo`, the projections and the
    absorbed bmm are kept by the tokens that set them."""
    mm = c.model.mla_spec
    h = c.heads
    ops: dict[str, OpTime] = {}
    if projections:
        t = s.tokens

        def price_proj() -> OpTime:
            return combine(*(gemm(pr, c, t, k, n) for k, n in projection_shapes(c)))

        ops["attn_proj"] = kept(memo, ("attn proj", t), price_proj)

    one = _one_dense_path(s)
    if one is not None:
        ops.update(_dense_cores(pr, c, s, *one, memo))
        return ops
    absorbed = (s.path == ABSORB) | (s.path == SPARSE_ABSORB)
    dense_dec = (s.path == ABSORB) & s.is_decode
    sparse = s.path == SPARSE_ABSORB
    bmm_tokens = float(s.q[dense_dec | sparse].sum())
    ops["mla_bmm"] = kept(memo, ("mla bmm", bmm_tokens), lambda: absorb_bmm(pr, c, bmm_tokens))
    cores: list[OpTime] = []
    prefill: list[OpTime] = []
    if dense_dec.any():
        cores.append(mla_decode(pr, _segments(c, s, dense_dec), c.kv_dtype, h))
    if sparse.any():  # decode segments' sparse cores under attn_decode, extends' under prefill
        for decode, out in ((True, cores), (False, prefill)):
            sel = sparse & (s.is_decode == decode)
            if sel.any():
                out.append(_sparse(pr, c, s, sel))
        ops["dsa_indexer"] = dsa_indexer(pr, c, s, sparse)
    ops["attn_decode"] = combine(*cores)

    ext_abs = absorbed & ~s.is_decode & ~sparse
    if ext_abs.any():  # short extends after a short prefix (SGLang MLA for extend)
        prefill.append(pr.price(MlaExtendAbsorb.over(_segments(c, s, ext_abs), h)))
    for code in (EXPAND, EXPAND_CHUNKED):
        sel = s.path == code
        if not sel.any():
            continue
        up = up_projection_width(c)
        prefill.append(gemm(pr, c, float(s.k[sel].sum()), mm.kv_lora_rank, up))  # up-projection
        over = _segments(c, s, sel)
        core = MlaPrefill.over(over, h)
        if code == EXPAND_CHUNKED:
            core = MlaPrefillChunked.over(over, h, chunk_tokens=c.chunk_tokens)
        prefill.append(pr.price(core))
    if prefill:
        ops["attn_prefill"] = combine(*prefill)
    return ops


def projection_shapes(c: RankContext) -> list[tuple[int, int]]:
    """(k, n) of each GEMM of an MLA layer's projections on one GPU of the rank, in order.
    With a q LoRA, SGLang runs q_a and kv_a as one GEMM over the same input
    (`fused_qkv_a_proj_with_mqa`, d -> q_lora_rank + d_c + d_s: 7168 -> 2112 for
    DeepSeek-V3), one weight read and one launch; without one, q is projected from d."""
    mm, d, h = c.model.mla_spec, c.model.hidden_size, c.heads
    qk = mm.qk_nope_head_dim + mm.qk_rope_head_dim
    kv_a = mm.kv_lora_rank + mm.qk_rope_head_dim
    shapes = [
        (mm.q_lora_rank or d, h * qk),
        (d, (mm.q_lora_rank or 0) + kv_a),
        (h * mm.v_head_dim, d),
    ]
    if mm.output_gate:  # Kimi K3: sigmoid(x W_g) gates the heads' outputs before o_proj
        shapes.append((d, h * mm.v_head_dim))
    return shapes


def up_projection_width(c: RankContext) -> int:
    """Output width of kv_b, the up-projection of the latent cache on one GPU of the rank."""
    mm = c.model.mla_spec
    return c.heads * (mm.qk_nope_head_dim + mm.v_head_dim)


def _one_dense_path(s: RankSegments) -> tuple[int, bool] | None:
    """(path, decode) where every segment takes one dense path and is of one kind (decode or
    extend), as a rank's decode requests and its chunks nearly always are; else None."""
    path, dec = s.path, s.is_decode
    if not path.shape[0]:
        return None
    p, d = int(path[0]), bool(dec[0])
    if p == SPARSE_ABSORB or np.count_nonzero(path != p) or np.count_nonzero(dec != d):
        return None
    return p, d


def _dense_cores(
    pr: Pricer, c: RankContext, s: RankSegments, path: int, decode: bool, memo: Memo | None
) -> dict[str, OpTime]:
    """`mla_layer`'s ops but the projections for segments of one dense `path`, all decode or
    all extend (`_one_dense_path`): the same ops in the same order, without the masks that
    pick each kind of core out of a mixed batch."""
    h = c.heads
    bmm_tokens = s.tokens if path == ABSORB and decode else 0.0
    ops = {"mla_bmm": kept(memo, ("mla bmm", bmm_tokens), lambda: absorb_bmm(pr, c, bmm_tokens))}
    every = Segments(q=s.q, k=s.k, cache_bytes=c.kv_bytes_layer)
    if path == ABSORB:
        if decode:
            ops["attn_decode"] = combine(mla_decode(pr, every, c.kv_dtype, h))
        else:  # short extends after a short prefix (SGLang MLA for extend)
            ops["attn_decode"] = ZERO
            ops["attn_prefill"] = combine(pr.price(MlaExtendAbsorb.over(every, h)))
        return ops
    ops["attn_decode"] = ZERO
    mm = c.model.mla_spec
    up = gemm(pr, c, float(s.k.sum()), mm.kv_lora_rank, up_projection_width(c))
    core = MlaPrefill.over(every, h)
    if path == EXPAND_CHUNKED:
        core = MlaPrefillChunked.over(every, h, chunk_tokens=c.chunk_tokens)
    ops["attn_prefill"] = combine(up, pr.price(core))
    return ops


def mla_decode(pr: Pricer, s: Segments, kv_dtype: str, heads: float) -> OpTime:
    """The absorbed decode core over `s`. A verify window (more than one query token per
    request) costs no less than one query token over the same caches: the kernel reads every
    cache either way and only computes more (FlashMLA folds a request's query tokens into the
    rows of its tiles). A profile's table at the window's own query length, read far from its
    grid (FlashMLA's two-token table holds batch 128 only), could otherwise price a small
    batch's verify below its one-token decode."""
    op = MlaDecode.over(s, kv_dtype, heads)
    t = pr.price(op)
    if op.s_q <= 1:
        return t
    one = pr.price(MlaDecode.over(replace(s, q=np.ones_like(s.q)), kv_dtype, heads))
    if t.seconds >= one.seconds:
        return t
    return replace(one, extrapolated=True, detail=f"verify at its one-token floor: {one.detail}")


def _segments(
    c: RankContext, s: RankSegments, sel: NDArray[np.bool_], cache_bytes: float | None = None
) -> Segments:
    """The selected segments, each token of their cache `cache_bytes` (default: the
    deployment's latent cache)."""
    cache = c.kv_bytes_layer if cache_bytes is None else cache_bytes
    return Segments(q=s.q[sel], k=s.k[sel], cache_bytes=cache)


def _sparse(pr: Pricer, c: RankContext, s: RankSegments, sel: NDArray[np.bool_]) -> OpTime:
    """Absorbed attention over the indexer's top-k, for decode segments or for extend/prefill
    segments (`sel` holds one kind)."""
    over = _segments(c, s, sel)
    if s.is_decode[sel].all():
        return pr.price(DsaAttnDecode.over(over, c.kv_dtype, c.topk, c.heads))
    return pr.price(DsaAttnPrefill.over(over, c.topk, c.heads))


def dsa_indexer(pr: Pricer, c: RankContext, s: RankSegments, sel: NDArray[np.bool_]) -> OpTime:
    """Indexer scoring of every cached token (FP8) plus its small projections and top-k.

    Decode segments score each of their S query tokens against the whole cache (the decode
    tables' convention); extend/prefill segments score causally (`attention_ops`)."""
    x = c.model.dsa
    assert x is not None
    key_bytes = indexer_bytes_per_token_layer(c.model)
    dims = (float(x.index_n_heads), float(x.index_head_dim))
    scores = []
    for op, kind in (
        (DsaIndexerDecode, sel & s.is_decode),
        (DsaIndexerPrefill, sel & ~s.is_decode),
    ):
        if kind.any():
            scores.append(pr.price(op.over(_segments(c, s, kind, key_bytes), *dims), "fp8"))
    if not c.topk_in_indexer:
        topk = DsaTopk.over(_segments(c, s, sel), s.is_decode[sel], c.topk)
        scores.append(pr.price(topk))
    mm, t = c.model.mla_spec, float(s.q[sel].sum())
    width = x.index_n_heads * x.index_head_dim
    proj = combine(
        gemm(pr, c, t, mm.q_lora_rank or c.model.hidden_size, width),
        gemm(pr, c, t, c.model.hidden_size, x.index_head_dim + x.index_n_heads),
    )
    return combine(*scores, proj)


def gqa_layer(
    pr: Pricer, c: RankContext, s: RankSegments, projections: bool = True
) -> dict[str, OpTime]:
    """One GQA layer: QKV/O projections (unless not `projections`) and the attention core
    (roofline unless profiled)."""
    g = c.model.gqa_spec
    d, h, t = c.model.hidden_size, c.heads, s.tokens
    kvh = max(1, g.num_kv_heads // c.tp)
    kv_b = (1.0 if c.kv_dtype == "fp8" else 2.0) * 2 * kvh * g.head_dim
    ops: dict[str, OpTime] = {}
    if projections:
        ops["attn_proj"] = combine(
            gemm(pr, c, t, d, (h + 2 * kvh) * g.head_dim), gemm(pr, c, t, h * g.head_dim, d)
        )
    for name, op, sel in (
        ("attn_decode", GqaDecode, s.is_decode),
        ("attn_prefill", GqaPrefill, ~s.is_decode),
    ):
        if sel.any():
            ops[name] = pr.price(op.over(_segments(c, s, sel, kv_b), h, g.head_dim))
    return ops


def linear_attention_layer(pr: Pricer, c: RankContext, s: RankSegments) -> OpTime:
    """One KDA layer: projections plus the recurrent-state update, state read and written."""
    la = c.model.linear_attention
    assert la is not None
    h = la.num_heads // c.tp
    t, d = s.tokens, c.model.hidden_size
    proj = combine(gemm(pr, c, t, d, 4 * h * la.head_dim), gemm(pr, c, t, h * la.head_dim, d))
    core = Kda(h, float(len(s.q)), t, la.head_dim, la.state_bytes_per_elem)
    return combine(proj, pr.price(core))


def ffn_rank_ops(
    pr: Pricer, c: RankContext, tokens: float, *, dense: bool = True, memo: Memo | None = None
) -> dict[str, OpTime]:
    """Per-layer rank-side FFN work: MoE gate and shared experts; and, with `dense`, one dense
    MLP layer (the MTP module has none: it is a MoE layer). With a `memo`, each is kept by
    `tokens`."""
    moe, d = c.model.moe, c.model.hidden_size
    shared_i = moe.n_shared_experts * moe.moe_intermediate_size // c.shared_tp

    def mlp(inter: int) -> OpTime:  # gate+up, then down
        return combine(gemm(pr, c, tokens, d, 2 * inter), gemm(pr, c, tokens, inter, d))

    ops = {
        "moe_gate": kept(  # BF16 in checkpoints
            memo, ("moe gate", tokens), lambda: gemm(pr, c, tokens, d, moe.n_routed_experts, "bf16")
        ),
        "moe_shared": kept(memo, ("moe shared", tokens), lambda: mlp(shared_i))
        if shared_i
        else ZERO,
    }
    if dense:
        dense_i = moe.dense_intermediate_size // c.dense_split
        ops["dense_mlp"] = kept(memo, ("dense mlp", tokens), lambda: mlp(dense_i))
    return ops
