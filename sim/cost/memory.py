"""Per-GPU memory of a deployment: weights under its parallelism, KV per token, capacity.

MLA's latent is shared by all heads and cannot be split by heads, so every GPU of an attention-TP
rank stores the rank's whole latent cache: the KV duplication factor is the attention TP size
(for GQA, attention TP beyond the KV-head count duplicates heads the same way).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.cost.activations import activation_reserve_bytes
from sim.cost.intensity import FP8_MLA_BYTES_PER_TOKEN_LAYER
from sim.cost.params import layer_params, linear_attention_params
from sim.specs.deployment import Deployment
from sim.specs.gpu import GB, GpuSpec
from sim.specs.model import ModelSpec
from sim.specs.scenario import check_deployment

# Bytes per weight: FP8 with one fp32 scale per 128 x 128 block (DeepSeek-V3's FP8 checkpoints);
# FP4 (MXFP4) with one 8-bit scale per 32 values.
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0 + 4.0 / (128 * 128), "fp4": 0.5 + 1.0 / 32}
FP32_SCALE_BYTES = 4.0
BF16_BYTES = 2.0


def indexer_bytes_per_token_layer(model: ModelSpec) -> float:
    """DSA indexer key cache per token per layer: `index_head_dim` FP8 values and one fp32 scale
    (DeepSeek-V3.2: 132 B); 0 for a model without an indexer."""
    return 0.0 if model.dsa is None else model.dsa.index_head_dim + FP32_SCALE_BYTES


def dsa_active(model: ModelSpec, deployment: Deployment) -> bool:
    """Whether sparse attention runs: the model has an indexer and the deployment allows it."""
    if deployment.dsa == "on" and model.dsa is None:
        raise ValueError(
            f"dsa='on' but model {model.name!r} has no DSA indexer; use 'auto' or 'off'"
        )
    return model.dsa is not None and deployment.dsa != "off"


def kv_dup_factor(model: ModelSpec, attn_tp: int) -> int:
    """Copies of each cached token across the GPUs of one attention rank."""
    return attn_tp // min(attn_tp, model.kv_heads)


def kv_bytes_per_token_layer(model: ModelSpec, kv_dtype: str, *, sparse: bool = False) -> float:
    """One copy of one token's cache in one attention layer (all KV heads).

    FP8 MLA has two layouts. Dense MLA (SGLang's and vLLM's `kv_cache_dtype=fp8`) stores the
    whole latent and RoPE key as FP8 with one scale per tensor: 576 B (DeepSeek-V3), half of
    BF16. DSA's sparse kernels (`sparse`: FlashMLA's sparse FP8 layout, deepseek-ai/FlashMLA)
    keep 512 FP8 values with 4 fp32 scales and the 64 RoPE values in BF16: 656 B."""
    if model.attention == "mla":
        if kv_dtype == "fp8":
            if sparse:
                return float(FP8_MLA_BYTES_PER_TOKEN_LAYER)
            return 1.0 * model.kv_elems_per_token_per_layer
        return 2.0 * model.kv_elems_per_token_per_layer
    return (1.0 if kv_dtype == "fp8" else 2.0) * model.kv_elems_per_token_per_layer


def draft_modules(model: ModelSpec, deployment: Deployment) -> int:
    """MTP modules held with MTP on: the model's own, or for a model that ships none one
    assumed module of the same shape (one MoE decoder layer), as the step prices its draft."""
    if not deployment.mtp_draft_tokens:
        return 0
    return model.mtp_layers or 1


def cached_layers(model: ModelSpec, deployment: Deployment) -> int:
    """Layers whose KV grows with context: attention layers, plus MTP layers when MTP is on."""
    return model.attention_layers + draft_modules(model, deployment)


def kv_bytes_per_token(model: ModelSpec, deployment: Deployment) -> float:
    """One copy of one token, all cached layers (what a PD transfer moves)."""
    sparse = dsa_active(model, deployment)
    per_layer = kv_bytes_per_token_layer(model, deployment.kv_dtype, sparse=sparse)
    if sparse:
        per_layer += indexer_bytes_per_token_layer(model)
    return per_layer * cached_layers(model, deployment)


def kv_bytes_per_token_per_gpu(model: ModelSpec, deployment: Deployment) -> float:
    """Bytes one token of a rank's request occupies on each GPU of that rank."""
    heads_split = min(deployment.attn_tp, model.kv_heads)  # GQA shards KV heads up to H_kv
    return kv_bytes_per_token(model, deployment) / heads_split


def state_bytes_per_request_per_gpu(model: ModelSpec, deployment: Deployment) -> float:
    """Fixed recurrent state of linear-attention layers (split by heads over attention TP)."""
    la = model.linear_attention
    if la is None:
        return 0.0
    state = la.num_heads * la.head_dim * la.head_dim * la.state_bytes_per_elem
    conv = 3 * la.num_heads * la.head_dim * max(la.conv_kernel_size - 1, 0) * 2
    return la.num_layers * (state + conv) / deployment.attn_tp


def weight_bytes_per_gpu(model: ModelSpec, deployment: Deployment) -> float:
    """Weights one GPU holds: attention split by attention TP, experts by EP x TP; the MoE
    routers and the MTP modules' eh_proj stay BF16 (unquantised in the FP8 checkpoints)."""
    d = deployment
    lp = layer_params(model)
    moe = model.moe
    attn_layer = lp.attn_sharded / d.attn_tp + lp.attn_replicated
    attn = model.attention_layers * attn_layer
    attn += (model.num_layers - model.attention_layers) * linear_attention_params(model) / d.attn_tp
    local_experts = math.ceil((moe.n_routed_experts + d.eplb_redundant_experts) / d.ep)
    experts = (local_experts * lp.routed_expert + lp.shared_experts) / d.moe_tp
    dense_split = {"tp": d.attn_tp, "dp": 1, "unit": d.gpus}[d.dense_ffn]
    ffn = model.moe_layers * experts + moe.first_dense_layers * lp.dense_mlp / dense_split
    mtp = draft_modules(model, d)  # each one more MoE decoder layer, plus its 2d -> d eh_proj
    quantised = attn + ffn + mtp * (attn_layer + experts)
    bf16 = (model.moe_layers + mtp) * lp.router + mtp * 2 * model.hidden_size**2
    table = model.vocab_size * model.hidden_size * 2.0  # BF16, vocab-parallel
    head_split = d.gpus if d.lm_head == "unit" else d.attn_tp
    wb = WEIGHT_BYTES[d.weight_dtype]
    return quantised * wb + bf16 * BF16_BYTES + table / d.attn_tp + table / head_split


def _fit_hint(weight_dtype: str) -> str:
    """What to change when a deployment does not fit: smaller weights only if there are any."""
    smaller = {"bf16": "fp8", "fp8": "fp4"}.get(weight_dtype)
    weights = f"use {smaller.upper()} weights (weight_dtype: {smaller}), " if smaller else ""
    return f"add GPUs (larger EP), {weights}or raise mem_fraction"


@dataclass(frozen=True, kw_only=True)
class MemoryPlan:
    """Where one GPU's HBM goes, and how many tokens the deployment can cache."""

    weights_bytes_per_gpu: float
    activation_reserve_bytes_per_gpu: float
    usable_bytes_per_gpu: float
    kv_bytes_per_token_per_gpu: float
    kv_dup_factor: int
    kv_capacity_tokens_per_gpu: int
    kv_capacity_tokens_per_rank: int
    kv_capacity_tokens_total: int
    state_bytes_per_request_per_gpu: float

    @property
    def kv_pool_bytes_per_gpu(self) -> float:
        return self.kv_capacity_tokens_per_gpu * self.kv_bytes_per_token_per_gpu


def plan_memory(
    model: ModelSpec, gpu: GpuSpec, deployment: Deployment, *, strict: bool = True
) -> MemoryPlan:
    """Memory plan of one GPU; ValueError when the model cannot run the layout
    (`check_deployment`) or, with `strict`, when the minimum KV does not fit."""
    d = deployment
    check_deployment(model, d)
    weights = weight_bytes_per_gpu(model, d)
    reserve = activation_reserve_bytes(model, d)
    usable = gpu.hbm_bytes * d.mem_fraction
    per_token = kv_bytes_per_token_per_gpu(model, d)
    free = usable - weights - reserve
    min_kv = d.chunked_prefill_tokens * per_token
    if strict and free < min_kv:
        raise ValueError(
            f"deployment {d.name!r} does not fit on {gpu.name}: weights {weights / GB:.1f} GB + "
            f"activations {reserve / GB:.1f} GB + minimum KV {min_kv / GB:.2f} GB "
            f"({d.chunked_prefill_tokens} tokens) exceed the usable {usable / GB:.1f} GB "
            f"(mem_fraction {d.mem_fraction}) by {(min_kv - free) / GB:.1f} GB; "
            f"{_fit_hint(d.weight_dtype)}"
        )
    per_gpu = max(int(free // per_token), 0)
    return MemoryPlan(
        weights_bytes_per_gpu=weights,
        activation_reserve_bytes_per_gpu=reserve,
        usable_bytes_per_gpu=usable,
        kv_bytes_per_token_per_gpu=per_token,
        kv_dup_factor=kv_dup_factor(model, d.attn_tp),
        kv_capacity_tokens_per_gpu=per_gpu,
        kv_capacity_tokens_per_rank=per_gpu,
        kv_capacity_tokens_total=per_gpu * d.attn_dp * d.replicas,
        state_bytes_per_request_per_gpu=state_bytes_per_request_per_gpu(model, d),
    )
