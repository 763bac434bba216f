"""The one place that knows HuggingFace `config.json` field names (DeepSeek, Kimi, Qwen3-MoE)."""

from __future__ import annotations

from typing import Any

from sim.specs.model import DsaSpec, GqaSpec, LinearAttentionSpec, MlaSpec, ModelSpec, MoeSpec


def _need(cfg: dict[str, Any], key: str, name: str) -> Any:
    if key not in cfg:
        raise ValueError(f"config.json of {name!r} lacks {key!r}, which this model family needs")
    return cfg[key]


MLA_FIELDS = ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "q_lora_rank")
MLA_MODEL_TYPES = ("deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "kimi_k3")


def _refuse_mla_without_latent(cfg: dict[str, Any], name: str) -> None:
    """A config with MLA's marks but no `kv_lora_rank` would otherwise read as a GQA model with
    made-up heads: refuse it, naming what is missing."""
    marks = [k for k in MLA_FIELDS if cfg.get(k)]
    model_type = str(cfg.get("model_type", ""))
    if model_type in MLA_MODEL_TYPES:
        marks.insert(0, f"model_type {model_type!r}")
    if marks:
        raise ValueError(
            f"config.json of {name!r} looks like an MLA model ({', '.join(marks)}) but lacks "
            "'kv_lora_rank', the latent width MLA caches; add it (DeepSeek-V3: 512)"
        )


# quantization_config.quant_method -> the weights' dtype; no quantization_config means the
# checkpoint's own BF16 weights. A deployment has one GEMM weight dtype, so a config that
# quantises only some modules (Kimi K3: mxfp4 'modules: experts') is priced at that dtype
# throughout, its largest share of the weights
QUANT_METHODS = {"fp8": "fp8", "mxfp4": "fp4", "nvfp4": "fp4", "modelopt_fp4": "fp4"}


def checkpoint_weight_dtype(cfg: dict[str, Any], name: str) -> str:
    """'bf16' without a `quantization_config`, else the dtype its `quant_method` names."""
    quant = cfg.get("quantization_config")
    if not quant:
        return "bf16"
    method = str(quant.get("quant_method", "")) if isinstance(quant, dict) else ""
    if method not in QUANT_METHODS:
        raise ValueError(
            f"config.json of {name!r}: quantization_config.quant_method {method!r} is not one "
            f"the simulator prices; known: {', '.join(QUANT_METHODS)} (or remove "
            "quantization_config for BF16 weights)"
        )
    return QUANT_METHODS[method]


def model_from_hf_config(cfg: dict[str, Any], name: str) -> ModelSpec:
    """Build a `ModelSpec` from a parsed HuggingFace config.json.

    MLA is recognised by `kv_lora_rank`; otherwise the model is GQA. Raises ValueError naming the
    missing field when the config lacks one the recognised family needs.
    """
    hidden = int(_need(cfg, "hidden_size", name))
    layers = int(_need(cfg, "num_hidden_layers", name))
    heads = int(_need(cfg, "num_attention_heads", name))
    mla = gqa = None
    if cfg.get("kv_lora_rank"):
        mla = MlaSpec(
            q_lora_rank=cfg.get("q_lora_rank"),
            kv_lora_rank=int(cfg["kv_lora_rank"]),
            qk_nope_head_dim=int(_need(cfg, "qk_nope_head_dim", name)),
            qk_rope_head_dim=int(_need(cfg, "qk_rope_head_dim", name)),
            v_head_dim=int(_need(cfg, "v_head_dim", name)),
            rope_rotary=not cfg.get("mla_use_nope", False),
            output_gate=bool(cfg.get("mla_use_output_gate", False)),
        )
    else:
        _refuse_mla_without_latent(cfg, name)
        gqa = GqaSpec(
            num_kv_heads=int(cfg.get("num_key_value_heads", heads)),
            head_dim=int(cfg.get("head_dim", hidden // heads)),
        )
    n_experts = cfg.get("n_routed_experts", cfg.get("num_experts"))
    if n_experts is None:
        raise ValueError(f"config.json of {name!r} has no experts (n_routed_experts/num_experts)")
    moe = MoeSpec(
        n_routed_experts=int(n_experts),
        experts_per_token=int(_need(cfg, "num_experts_per_tok", name)),
        n_shared_experts=int(cfg.get("n_shared_experts", 0) or 0),
        moe_intermediate_size=int(_need(cfg, "moe_intermediate_size", name)),
        first_dense_layers=int(cfg.get("first_k_dense_replace", 0)),
        dense_intermediate_size=int(cfg.get("intermediate_size", cfg["moe_intermediate_size"])),
        expert_groups=int(cfg.get("n_group", 1) or 1),
        groups_per_token=int(cfg.get("topk_group", cfg.get("n_group", 1)) or 1),
    )
    dsa = None
    if cfg.get("index_topk"):
        dsa = DsaSpec(
            index_n_heads=int(_need(cfg, "index_n_heads", name)),
            index_head_dim=int(_need(cfg, "index_head_dim", name)),
            index_topk=int(cfg["index_topk"]),
        )
    linear = None
    lin_cfg = cfg.get("linear_attn_config")
    if lin_cfg:
        linear = LinearAttentionSpec(
            num_layers=len(_need(lin_cfg, "kda_layers", name)),
            num_heads=int(_need(lin_cfg, "num_heads", name)),
            head_dim=int(_need(lin_cfg, "head_dim", name)),
            conv_kernel_size=int(lin_cfg.get("short_conv_kernel_size", 4)),
        )
    return ModelSpec(
        name=name,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        vocab_size=int(_need(cfg, "vocab_size", name)),
        attention="mla" if mla else "gqa",
        mla=mla,
        gqa=gqa,
        moe=moe,
        mtp_layers=int(cfg.get("num_nextn_predict_layers", 0) or 0),
        dsa=dsa,
        linear_attention=linear,
        max_position_tokens=int(cfg.get("max_position_embeddings", 163840)),
        weight_dtype=checkpoint_weight_dtype(cfg, name),
    )
