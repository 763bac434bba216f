"""Model architecture: the shapes every cost formula reads.

`ModelSpec.from_hf_config` (in `sim.specs.hf_config`) is the only code that knows HuggingFace /
DeepSeek / Kimi / Qwen field names; everything else reads the fields below.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sim.specs.base import Spec


class MlaSpec(Spec):
    """Multi-head latent attention: one shared latent per token, up-projected per head."""

    q_lora_rank: int | None = Field(
        ge=1, description="Query down-projection rank (None: queries projected directly)."
    )
    kv_lora_rank: int = Field(ge=1, description="Latent width d_c cached per token (512).")
    qk_nope_head_dim: int = Field(ge=1, description="Per-head no-RoPE q/k width d_k (128).")
    qk_rope_head_dim: int = Field(ge=0, description="Shared RoPE key width d_s (64).")
    v_head_dim: int = Field(ge=1, description="Per-head value width d_v (128).")
    rope_rotary: bool = Field(
        default=True, description="False when the d_s dims carry no rotation (Kimi K3)."
    )
    output_gate: bool = Field(default=False, description="Gated output (Kimi K3 MLA layers).")


class GqaSpec(Spec):
    """Grouped-query attention (MHA when kv heads = heads, MQA when kv heads = 1)."""

    num_kv_heads: int = Field(ge=1, description="Key/value heads shared by groups of query heads.")
    head_dim: int = Field(ge=1, description="Per-head q/k/v width.")


class MoeSpec(Spec):
    """Mixture-of-experts FFN layers, after `first_dense_layers` dense ones."""

    n_routed_experts: int = Field(ge=1, description="Routed experts per MoE layer.")
    experts_per_token: int = Field(ge=1, description="Routed experts each token visits (top-k).")
    n_shared_experts: int = Field(ge=0, description="Shared experts every token visits.")
    moe_intermediate_size: int = Field(ge=1, description="Intermediate width of one expert.")
    first_dense_layers: int = Field(ge=0, description="Leading layers with a dense MLP instead.")
    dense_intermediate_size: int = Field(ge=1, description="Intermediate width of dense MLPs.")
    expert_groups: int = Field(
        default=1, ge=1, description="Expert groups for group-limited routing (n_group)."
    )
    groups_per_token: int = Field(
        default=1, ge=1, description="Groups a token's experts may come from (topk_group)."
    )


class DsaSpec(Spec):
    """DeepSeek sparse attention: a light indexer keeps the top-k cached tokens per query."""

    index_n_heads: int = Field(ge=1, description="Indexer heads (64).")
    index_head_dim: int = Field(ge=1, description="Indexer key width (128, cached in FP8).")
    index_topk: int = Field(ge=1, description="Cached tokens kept per query (2048).")


class LinearAttentionSpec(Spec):
    """Linear-attention layers (Kimi K3's KDA): a fixed-size recurrent state per request."""

    num_layers: int = Field(ge=1, description="How many of the model's layers are linear.")
    num_heads: int = Field(ge=1, description="Heads per linear layer.")
    head_dim: int = Field(ge=1, description="Key and value width per head (state is d x d).")
    conv_kernel_size: int = Field(default=4, ge=0, description="Short convolution length.")
    state_bytes_per_elem: int = Field(
        default=4, ge=1, description="Bytes per recurrent-state element (FP32 state)."
    )


class ModelSpec(Spec):
    """A decoder-only MoE transformer with MLA or GQA attention."""

    name: str = Field(description="Catalog or user-given name.")
    hidden_size: int = Field(ge=1, description="Model width d_model.")
    num_layers: int = Field(ge=1, description="Decoder layers (attention + linear), MTP excluded.")
    num_heads: int = Field(ge=1, description="Query heads per attention layer.")
    vocab_size: int = Field(ge=1, description="Vocabulary size (embedding and lm_head rows).")
    attention: Literal["mla", "gqa"] = Field(description="Attention family of the full layers.")
    mla: MlaSpec | None = Field(default=None, description="MLA shapes (attention == 'mla').")
    gqa: GqaSpec | None = Field(default=None, description="GQA shapes (attention == 'gqa').")
    moe: MoeSpec = Field(description="Expert layout.")
    mtp_layers: int = Field(default=0, ge=0, description="Multi-token-prediction modules.")
    dsa: DsaSpec | None = Field(default=None, description="Sparse-attention indexer, if any.")
    linear_attention: LinearAttentionSpec | None = Field(
        default=None, description="Linear-attention layers of a hybrid model, if any."
    )
    max_position_tokens: int = Field(default=163840, ge=1, description="Longest context.")
    weight_dtype: Literal["bf16", "fp8", "fp4"] = Field(
        default="bf16",
        description="Dtype of the checkpoint's GEMM weights (its quantization_config; none: "
        "BF16). A deployment that does not set weight_dtype serves these.",
    )

    @model_validator(mode="after")
    def _attention_matches(self) -> ModelSpec:
        if self.attention == "mla" and self.mla is None:
            raise ValueError("attention is 'mla' but the 'mla' block is missing")
        if self.attention == "gqa" and self.gqa is None:
            raise ValueError("attention is 'gqa' but the 'gqa' block is missing")
        if self.linear_attention and self.linear_attention.num_layers >= self.num_layers:
            raise ValueError(
                f"linear_attention.num_layers ({self.linear_attention.num_layers}) must be "
                f"below num_layers ({self.num_layers}): a hybrid keeps some full-attention layers"
            )
        if self.moe.first_dense_layers > self.num_layers:
            raise ValueError("moe.first_dense_layers exceeds num_layers")
        return self

    @property
    def attention_layers(self) -> int:
        """Layers with a growing KV cache (all but the linear-attention ones)."""
        linear = self.linear_attention.num_layers if self.linear_attention else 0
        return self.num_layers - linear

    @property
    def moe_layers(self) -> int:
        return self.num_layers - self.moe.first_dense_layers

    @property
    def kv_heads(self) -> int:
        """Distinct K/V heads in the cache: 1 for MLA (one latent shared by all heads)."""
        return 1 if self.attention == "mla" else self.gqa_spec.num_kv_heads

    @property
    def kv_elems_per_token_per_layer(self) -> int:
        """Numbers cached per token per attention layer: d_c + d_s for MLA, 2*H_kv*d for GQA."""
        if self.attention == "mla":
            return self.mla_spec.kv_lora_rank + self.mla_spec.qk_rope_head_dim
        return 2 * self.gqa_spec.num_kv_heads * self.gqa_spec.head_dim

    @property
    def mla_spec(self) -> MlaSpec:
        if self.mla is None:
            raise ValueError(f"model {self.name!r} has no MLA attention")
        return self.mla

    @property
    def gqa_spec(self) -> GqaSpec:
        if self.gqa is None:
            raise ValueError(f"model {self.name!r} has no GQA attention")
        return self.gqa
