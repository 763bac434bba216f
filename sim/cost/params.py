"""Parameter counts per component, and how each is sharded: the input to weight memory."""

from __future__ import annotations

from dataclasses import dataclass

from sim.specs.model import ModelSpec


@dataclass(frozen=True, kw_only=True)
class LayerParams:
    """Parameters of one layer, split by how a deployment shards them."""

    attn_sharded: int  # head-dependent: split over attention TP
    attn_replicated: int  # latent / shared projections every attention-TP rank keeps whole
    routed_expert: int  # one routed expert (gate + up + down)
    shared_experts: int  # all shared experts of the layer
    router: int
    dense_mlp: int  # dense MLP (first_dense layers only)


def attention_params(model: ModelSpec) -> tuple[int, int]:
    """(head-sharded, replicated) parameters of one full-attention layer."""
    h, d = model.num_heads, model.hidden_size
    if model.attention == "gqa":
        g = model.gqa_spec
        return h * g.head_dim * d * 2 + 2 * g.num_kv_heads * g.head_dim * d, 0
    m = model.mla_spec
    qk = m.qk_nope_head_dim + m.qk_rope_head_dim
    if m.q_lora_rank:
        q_repl, q_shard = d * m.q_lora_rank, m.q_lora_rank * h * qk
    else:
        q_repl, q_shard = 0, d * h * qk
    kv_a = d * (m.kv_lora_rank + m.qk_rope_head_dim)
    kv_b = m.kv_lora_rank * h * (m.qk_nope_head_dim + m.v_head_dim)
    o_proj = h * m.v_head_dim * d
    gate = d * h * m.v_head_dim if m.output_gate else 0
    indexer = 0
    if model.dsa is not None:
        x = model.dsa
        q_in = m.q_lora_rank or d
        indexer = (
            q_in * x.index_n_heads * x.index_head_dim + d * x.index_head_dim + d * x.index_n_heads
        )
    return q_shard + kv_b + o_proj + gate, q_repl + kv_a + indexer


def linear_attention_params(model: ModelSpec) -> int:
    """One KDA layer: q, k, v, gate and output projections (head-sharded)."""
    la = model.linear_attention
    if la is None:
        return 0
    return 5 * model.hidden_size * la.num_heads * la.head_dim


def layer_params(model: ModelSpec) -> LayerParams:
    sharded, replicated = attention_params(model)
    moe, d = model.moe, model.hidden_size
    return LayerParams(
        attn_sharded=sharded,
        attn_replicated=replicated,
        routed_expert=3 * d * moe.moe_intermediate_size,
        shared_experts=moe.n_shared_experts * 3 * d * moe.moe_intermediate_size,
        router=d * moe.n_routed_experts,
        dense_mlp=3 * d * moe.dense_intermediate_size,
    )


def total_params(model: ModelSpec, include_mtp: bool = False) -> int:
    """All parameters (embedding and lm_head counted separately, as checkpoints do)."""
    lp = layer_params(model)
    moe = model.moe
    la_layers = model.linear_attention.num_layers if model.linear_attention else 0
    attn = model.attention_layers * (lp.attn_sharded + lp.attn_replicated)
    attn += la_layers * linear_attention_params(model)
    ffn = moe.first_dense_layers * lp.dense_mlp + model.moe_layers * (
        moe.n_routed_experts * lp.routed_expert + lp.shared_experts + lp.router
    )
    total = attn + ffn + 2 * model.vocab_size * model.hidden_size
    if include_mtp:
        total += model.mtp_layers * mtp_module_params(model)
    return total


def mtp_module_params(model: ModelSpec) -> int:
    """One MTP module: a full MoE decoder layer plus the 2d -> d projection (shares embeddings)."""
    lp = layer_params(model)
    d = model.hidden_size
    experts = model.moe.n_routed_experts * lp.routed_expert + lp.shared_experts + lp.router
    return lp.attn_sharded + lp.attn_replicated + experts + 2 * d * d
