"""All of one attention rank's own work in a step, op by op, for its segments.

Every layer's attention and projections, the router, shared experts and (where they are the
rank's own) the dense MLP and head, the memory-bound kernels, the TP all-reduce and the MTP
module's passes. `sim.cost.serving` prices each rank shape once through these.
"""

from __future__ import annotations

import numpy as np

from sim.cost.comm_ops import tp_allreduce
from sim.cost.elementwise import draft_elementwise, rank_elementwise
from sim.cost.layer_ops import (
    RankContext,
    RankSegments,
    ffn_rank_ops,
    gemm,
    gqa_layer,
    linear_attention_layer,
    mla_layer,
)
from sim.cost.pricing import Pricer
from sim.cost.rate import OpTime, combine, scale
from sim.cost.unit_work import draft_passes
from sim.specs.deployment import Deployment
from sim.specs.gpu import GpuSpec


def rank_ops(
    pr: Pricer, c: RankContext, d: Deployment, gpu: GpuSpec, s: RankSegments
) -> dict[str, OpTime]:
    """All of one rank's own work in a step (every layer), by op."""
    m = c.model
    layer = mla_layer(pr, c, s) if m.attention == "mla" else gqa_layer(pr, c, s)
    ops = {name: scale(t, m.attention_layers) for name, t in layer.items()}
    if m.linear_attention:
        ops["kda"] = scale(linear_attention_layer(pr, c, s), m.linear_attention.num_layers)
    own_dense = d.dense_ffn != "unit"  # else unit-wide (`unit_dense_ops`)
    ffn = ffn_rank_ops(pr, c, s.tokens, dense=own_dense)
    ops["moe_gate"] = scale(ffn["moe_gate"], m.moe_layers)
    ops["moe_shared"] = scale(ffn["moe_shared"], m.moe_layers)
    if own_dense:
        ops["dense_mlp"] = scale(ffn["dense_mlp"], m.moe.first_dense_layers)
    own_head = d.lm_head == "rank"  # else unit-wide (`unit_head_ops`)
    if own_head:
        ops["lm_head"] = head(pr, c, float(s.q[s.is_decode].sum() + s.sampling_prefills))
    ops["elementwise"] = rank_elementwise(pr, c, s, d.engine)
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
                scale(mtp_module(pr, c, draft_segments(s, q), rows), times)
                for q, times in draft_passes(drafts)
            )
        )
    if drafts and not dec.all():  # the module's extend over the prompt chunks fills its KV
        pre = ~dec
        chunks = RankSegments(q=s.q[pre], k=s.k[pre], is_decode=dec[pre], path=s.path[pre])
        rows = float(s.sampling_prefills) if own_head else 0.0
        ops["mtp_prefill"] = mtp_module(pr, c, chunks, rows)
    return ops


def draft_segments(s: RankSegments, width: int) -> RankSegments:
    """A rank's decode requests as one MTP pass of `width` tokens each, over their caches."""
    dec = s.is_decode
    q = np.full(int(dec.sum()), float(width))
    return RankSegments(q=q, k=s.k[dec], is_decode=dec[dec], path=s.path[dec])


def head(pr: Pricer, c: RankContext, tokens: float) -> OpTime:
    """Logits of `tokens` rows: lm_head is held and run in BF16 whatever the weights'
    dtype (vocab-parallel over attention TP)."""
    m = c.model
    return gemm(pr, c, tokens, m.hidden_size, m.vocab_size // c.tp, "bf16")


def mtp_module(pr: Pricer, c: RankContext, s: RankSegments, logits: float) -> OpTime:
    """One forward of the MTP module over segments `s` on a rank: the BF16 eh_proj of the
    embedding and hidden state, one attention layer, the MoE layer's gate and shared
    experts (its routed experts are unit-wide), its kernels, and `logits` head rows."""
    m = c.model
    layer = mla_layer(pr, c, s) if m.attention == "mla" else gqa_layer(pr, c, s)
    return combine(
        *layer.values(),
        *ffn_rank_ops(pr, c, s.tokens, dense=False).values(),
        draft_elementwise(pr, c, s),
        gemm(pr, c, s.tokens, 2 * m.hidden_size, m.hidden_size, "bf16"),
        head(pr, c, logits),
    )
