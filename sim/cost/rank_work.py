"""All of one attention rank's own work in a step, op by op, for its segments.

Every layer's attention and projections, the router, shared experts and (where they are the
rank's own) the dense MLP and head, the memory-bound kernels, the TP all-reduce and the MTP
module's passes. `sim.cost.serving` prices each rank shape once through these.

`rank_parts` splits the same work into parts that each depend on a few numbers (the rank's
tokens; its decode requests; its prefill chunks; its logits rows), so that a rank running
prompt chunks, whose whole shape rarely repeats, is priced from parts that do
(`sim.cost.mixed_rank`). Together the parts are `rank_ops` op for op.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from sim.cost.comm_ops import tp_allreduce
from sim.cost.dispatch import ABSORB, EXPAND
from sim.cost.elementwise import draft_elementwise, rank_elementwise
from sim.cost.layer_ops import (
    Memo,
    RankContext,
    RankSegments,
    ffn_rank_ops,
    gemm,
    gqa_layer,
    kept,
    linear_attention_layer,
    mla_layer,
)
from sim.cost.pricing import Pricer
from sim.cost.rate import SOURCE_RANK, ZERO, OpTime, combine, scale
from sim.cost.sampling import sampling
from sim.cost.unit_work import draft_passes
from sim.specs.deployment import Deployment
from sim.specs.gpu import GpuSpec

Ops = dict[str, OpTime]


def rank_ops(
    pr: Pricer,
    c: RankContext,
    d: Deployment,
    gpu: GpuSpec,
    s: RankSegments,
    memo: Memo | None = None,
) -> dict[str, OpTime]:
    """All of one rank's own work in a step (every layer), by op. With a `memo`, its
    memory-bound kernels' time (the rank's and each MTP pass's) is kept by the few numbers
    that set it (`_rank_elementwise`, `_draft_elementwise`): ranks of the same tokens share it."""
    m = c.model
    layer = mla_layer(pr, c, s, memo=memo) if m.attention == "mla" else gqa_layer(pr, c, s)
    ops = {name: scale(t, m.attention_layers) for name, t in layer.items()}
    if m.linear_attention:
        ops["kda"] = scale(linear_attention_layer(pr, c, s), m.linear_attention.num_layers)
    own_dense = d.dense_ffn != "unit"  # else unit-wide (`unit_dense_ops`)
    ffn = ffn_rank_ops(pr, c, s.tokens, dense=own_dense, memo=memo)
    ops["moe_gate"] = scale(ffn["moe_gate"], m.moe_layers)
    ops["moe_shared"] = scale(ffn["moe_shared"], m.moe_layers)
    if own_dense:
        ops["dense_mlp"] = scale(ffn["dense_mlp"], m.moe.first_dense_layers)
    own_head = d.lm_head == "rank"  # else unit-wide (`unit_head_ops`)
    ops.update(head_ops(pr, c, d, float(s.q[s.is_decode].sum() + s.sampling_prefills), memo))
    ops["elementwise"] = _rank_elementwise(pr, c, s, d.engine, memo)
    if c.tp > 1:
        allreduce = tp_allreduce(pr, m, d, gpu, s.tokens)
        ops["tp_allreduce"] = scale(allreduce, m.num_layers)
    drafts = d.mtp_draft_tokens
    dec = s.is_decode
    if drafts and dec.any():
        n = int(dec.sum())
        rows = float(n) if own_head else 0.0  # one logits row per request and pass
        ops["mtp_draft"] = combine(
            *(
                scale(mtp_module(pr, c, draft_segments(s, q), rows, memo), times)
                for q, times in draft_passes(drafts)
            )
        )
    if drafts and not dec.all():  # the module's extend over the prompt chunks fills its KV
        pre = ~dec
        chunks = RankSegments(q=s.q[pre], k=s.k[pre], is_decode=dec[pre], path=s.path[pre])
        rows = float(s.sampling_prefills) if own_head else 0.0
        ops["mtp_prefill"] = mtp_module(pr, c, chunks, rows, memo)
    return ops


def separable(c: RankContext) -> bool:
    """Whether `rank_parts` applies: not under DSA (its absorbed bmm, indexer and top-k span a
    rank's decode and prefill segments together) nor with linear-attention layers (one state
    update over all of them)."""
    return c.topk == 0 and c.model.linear_attention is None


def token_ops(pr: Pricer, c: RankContext, d: Deployment, gpu: GpuSpec, tokens: float) -> Ops:
    """The ops of `rank_ops` set by the rank's tokens alone (every layer): the attention
    projections, router and shared experts, the rank's own dense MLP, the TP all-reduce."""
    m = c.model
    one = RankSegments(
        q=np.array([tokens]),
        k=np.array([tokens]),
        is_decode=np.ones(1, dtype=bool),
        path=np.full(1, ABSORB, dtype=np.int8),
    )
    ops = {"attn_proj": scale(_layer(pr, c, one)["attn_proj"], m.attention_layers)}
    own_dense = d.dense_ffn != "unit"
    ffn = ffn_rank_ops(pr, c, tokens, dense=own_dense)
    ops["moe_gate"] = scale(ffn["moe_gate"], m.moe_layers)
    ops["moe_shared"] = scale(ffn["moe_shared"], m.moe_layers)
    if own_dense:
        ops["dense_mlp"] = scale(ffn["dense_mlp"], m.moe.first_dense_layers)
    if c.tp > 1:
        ops["tp_allreduce"] = scale(tp_allreduce(pr, m, d, gpu, tokens), m.num_layers)
    return ops


def elementwise_ops(
    pr: Pricer,
    c: RankContext,
    tokens: float,
    expanded: float,
    engine: str | None,
    all_decode: bool = False,
) -> Ops:
    """The rank's memory-bound kernels: set by its tokens, the cached tokens its expand-path
    chunks up-project (`expanded`) and whether it runs decodes only (an engine's fusions of
    graph-replayed decode), which is all `rank_elementwise` reads of its segments."""
    one = token_segment(tokens, expanded, all_decode)
    return {"elementwise": rank_elementwise(pr, c, one, engine)}


def head_ops(
    pr: Pricer, c: RankContext, d: Deployment, rows: float, memo: Memo | None = None
) -> Ops:
    """The rank's own lm_head over its logits rows (none where the head is unit-wide) and,
    under SGLang, its sampling of them wherever the head ran (`sim.cost.sampling`; the other
    engines' samplers are not modelled); with a `memo`, each kept by `rows`."""
    ops = {"lm_head": head(pr, c, rows, memo)} if d.lm_head == "rank" else {}
    if d.engine == "sglang":
        ops["sampling"] = kept(memo, ("sampling", rows), lambda: sampling(pr, c, rows))
    return ops


def decode_ops(
    pr: Pricer, c: RankContext, d: Deployment, s: RankSegments, memo: Memo | None = None
) -> Ops:
    """The ops of `rank_ops` set by the rank's decode (verify) segments `s` alone: their
    attention cores and absorbed bmm, and the MTP draft passes over them (`memo`: see
    `mtp_module`)."""
    assert s.is_decode.all()
    ops = _attention_ops(pr, c, s, memo)
    if d.mtp_draft_tokens and len(s.q):
        rows = float(len(s.q)) if d.lm_head == "rank" else 0.0
        passes = draft_passes(d.mtp_draft_tokens)
        ops["mtp_draft"] = combine(
            *(scale(mtp_module(pr, c, draft_segments(s, q), rows, memo), n) for q, n in passes)
        )
    return ops


def chunk_ops(pr: Pricer, c: RankContext, d: Deployment, s: RankSegments) -> Ops:
    """The ops of `rank_ops` set by the rank's prefill chunks `s` together: their attention,
    and the MTP module's attention layer in its extend over them (`mtp_module`; the rest of
    that extend is `chunk_token_ops`')."""
    assert not s.is_decode.any()
    mtp = bool(d.mtp_draft_tokens and len(s.q))
    layer = _layer(pr, c, s, projections=mtp)  # the MTP layer's own projections, if any
    ops = {name: scale(t, c.model.attention_layers) for name, t in layer.items()}
    ops.pop("attn_proj", None)
    if mtp:
        ops["mtp_prefill"] = combine(*layer.values())
    return ops


def chunk_token_ops(
    pr: Pricer,
    c: RankContext,
    d: Deployment,
    tokens: float,
    expanded: float,
    rows: float,
    memo: Memo | None = None,
) -> Ops:
    """The rest of the MTP module's extend over a rank's chunks (`mtp_module` but its
    attention layer): set by the chunks' tokens, the cached tokens the expand path up-projects
    and the chunks that complete their prompt (`rows`, logits rows where the head is the
    rank's own)."""
    if not d.mtp_draft_tokens or tokens <= 0:
        return {}
    m = c.model
    one = token_segment(tokens, expanded)
    part = combine(  # with a `memo`, each piece kept by what sets it, as `mtp_module` keeps them
        *ffn_rank_ops(pr, c, tokens, dense=False, memo=memo).values(),
        _draft_elementwise(pr, c, one, memo),
        kept(
            memo,
            ("eh proj", tokens),
            lambda: gemm(pr, c, tokens, 2 * m.hidden_size, m.hidden_size, "bf16"),
        ),
        head(pr, c, rows if d.lm_head == "rank" else 0.0, memo),
    )
    return {"mtp_prefill": part}


def token_segment(tokens: float, expanded: float, all_decode: bool | None = None) -> RankSegments:
    """One segment standing for a rank's `tokens`, with `expanded` cached tokens on the
    expand path, decode-only if `all_decode` (default: when nothing is expanded): all the
    memory-bound kernels read of a rank's segments."""
    path = EXPAND if expanded > 0 else ABSORB
    decode = expanded <= 0 if all_decode is None else all_decode
    return RankSegments(
        q=np.array([tokens]),
        k=np.array([expanded if expanded > 0 else tokens]),
        is_decode=np.array([decode]),
        path=np.full(1, path, dtype=np.int8),
    )


def rank_parts(pr: Pricer, c: RankContext, d: Deployment, gpu: GpuSpec, s: RankSegments) -> Ops:
    """`rank_ops` of a `separable` rank, assembled from its parts (no op is in two parts but
    a ZERO: the decode part's prefill cores and the chunks' decode cores are empty)."""
    dec = s.is_decode
    smp = s.samples
    decode = RankSegments(q=s.q[dec], k=s.k[dec], is_decode=dec[dec], path=s.path[dec])
    pre = ~dec
    chunks = RankSegments(
        q=s.q[pre],
        k=s.k[pre],
        is_decode=dec[pre],
        path=s.path[pre],
        samples=None if smp is None else smp[pre],
    )
    rows = float(s.q[dec].sum() + s.sampling_prefills)
    expanded_tokens = s.expanded_tokens
    return merge(
        token_ops(pr, c, d, gpu, s.tokens),
        elementwise_ops(pr, c, s.tokens, expanded_tokens, d.engine, bool(dec.all())),
        head_ops(pr, c, d, rows),
        decode_ops(pr, c, d, decode),
        chunk_ops(pr, c, d, chunks),
        chunk_token_ops(pr, c, d, chunks.tokens, expanded_tokens, float(chunks.sampling_prefills)),
    )


def merge(*parts: Ops) -> Ops:
    """Parts' ops by name, an op named in several the sum of theirs."""
    return weighted_merge([(1.0, part) for part in parts])


def weighted_merge(parts: Iterable[tuple[float, Ops]]) -> Ops:
    """Parts' ops, each part's times `w` times (`scale`), by name: an op named in one part its
    (scaled) time, one named in several the `combine` of theirs. The sum is accumulated in one
    pass, in the parts' order, without the scaled times and partial sums as objects (a step
    reads a chunk rank's ops from a dozen weighted parts): bit for bit what chaining `scale`
    and `combine` gives."""
    seen: dict[str, list[tuple[float, OpTime]]] = {}
    for w, part in parts:
        for name, t in part.items():
            if name in seen:
                seen[name].append((w, t))
            else:
                seen[name] = [(w, t)]
    out: Ops = {}
    for name, terms in seen.items():
        if len(terms) == 1:
            w, t = terms[0]
            out[name] = t if w == 1.0 else scale(t, w)
            continue
        seconds, source, rank, extrapolated, launches = 0.0, "", 3, False, 0.0
        for w, t in terms:
            s = t.seconds if w == 1.0 else t.seconds * w
            if s > 0.0:
                seconds += s
                launches += t.launches if w == 1.0 else t.launches * w
                r = SOURCE_RANK.get(t.source, 0)
                if r < rank:
                    source, rank = t.source, r
                extrapolated = extrapolated or t.extrapolated
        out[name] = (
            OpTime(seconds=seconds, source=source, extrapolated=extrapolated, launches=launches)
            if rank < 3
            else ZERO
        )
    return out


def decode_attention_ops(
    pr: Pricer, c: RankContext, s: RankSegments, memo: Memo | None = None
) -> Ops:
    """`decode_ops` but the MTP draft passes: the decode segments' attention cores alone."""
    assert s.is_decode.all()
    return _attention_ops(pr, c, s, memo)


def chunk_attention_ops(pr: Pricer, c: RankContext, s: RankSegments) -> Ops:
    """`chunk_ops` but the MTP extend's attention layer: the chunks' attention cores alone,
    every layer (the same times; what a rank's MoE layers hold of its chunk work)."""
    assert not s.is_decode.any()
    return _attention_ops(pr, c, s)


def _attention_ops(pr: Pricer, c: RankContext, s: RankSegments, memo: Memo | None = None) -> Ops:
    """One layer's attention cores over `s`, every layer (its projections are `token_ops`');
    with a `memo`, the absorbed bmm kept by its tokens (`mla_layer`)."""
    layer = _layer(pr, c, s, projections=False, memo=memo)
    return {name: scale(t, c.model.attention_layers) for name, t in layer.items()}


def _layer(
    pr: Pricer, c: RankContext, s: RankSegments, projections: bool = True, memo: Memo | None = None
) -> Ops:
    if c.model.attention == "mla":
        return mla_layer(pr, c, s, projections, memo)
    return gqa_layer(pr, c, s, projections)


def draft_segments(s: RankSegments, width: int) -> RankSegments:
    """A rank's decode requests as one MTP pass of `width` tokens each, over their caches."""
    dec = s.is_decode
    q = np.full(int(dec.sum()), float(width))
    return RankSegments(q=q, k=s.k[dec], is_decode=dec[dec], path=s.path[dec])


def head(pr: Pricer, c: RankContext, tokens: float, memo: Memo | None = None) -> OpTime:
    """Logits of `tokens` rows: lm_head is held and run in BF16 whatever the weights'
    dtype (vocab-parallel over attention TP)."""
    m = c.model
    return kept(
        memo,
        ("lm head", tokens),
        lambda: gemm(pr, c, tokens, m.hidden_size, m.vocab_size // c.tp, "bf16"),
    )


def mtp_module(
    pr: Pricer, c: RankContext, s: RankSegments, logits: float, memo: Memo | None = None
) -> OpTime:
    """One forward of the MTP module over segments `s` on a rank: the BF16 eh_proj of the
    embedding and hidden state, one attention layer, the MoE layer's gate and shared
    experts (its routed experts are unit-wide), its kernels, and `logits` head rows. With a
    `memo`, its kernels' time is kept by what sets it (`_draft_elementwise`)."""
    m, t = c.model, s.tokens
    layer = mla_layer(pr, c, s, memo=memo) if m.attention == "mla" else gqa_layer(pr, c, s)
    return combine(
        *layer.values(),
        *ffn_rank_ops(pr, c, t, dense=False, memo=memo).values(),
        _draft_elementwise(pr, c, s, memo),
        kept(
            memo, ("eh proj", t), lambda: gemm(pr, c, t, 2 * m.hidden_size, m.hidden_size, "bf16")
        ),
        head(pr, c, logits, memo),
    )


def _rank_elementwise(
    pr: Pricer, c: RankContext, s: RankSegments, engine: str | None, memo: Memo | None
) -> OpTime:
    """`rank_elementwise` of `s`, through `memo` by the three things its kernels read of `s`
    (`elementwise.rank_kernels`): its tokens, the cached tokens its expand-path segments
    up-project and whether it runs decodes only."""
    if memo is None:
        return rank_elementwise(pr, c, s, engine)
    key = ("rank elementwise", s.tokens, s.expanded_tokens, bool(s.is_decode.all()))
    return memo(key, lambda: rank_elementwise(pr, c, s, engine))


def _draft_elementwise(pr: Pricer, c: RankContext, s: RankSegments, memo: Memo | None) -> OpTime:
    """`draft_elementwise` of `s`, through `memo` by the two numbers its kernels read of `s`:
    its tokens and the cached tokens its expand-path segments up-project."""
    if memo is None:
        return draft_elementwise(pr, c, s)
    key = ("draft elementwise", s.tokens, s.expanded_tokens)
    return memo(key, lambda: draft_elementwise(pr, c, s))
