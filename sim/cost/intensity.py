"""Arithmetic intensity of decode attention (attention core only, fused kernel), seed 002.

With S query tokens per request (MTP verify: S = 1 + drafts) the FLOPs grow ~S-fold while the
cache is read once, so AI(S) ~= S * AI(1):
- MHA/GQA/MQA: (2/b) * S * H_q / H_kv  (MHA 1, GQA H_q/H_kv, MQA H_q in BF16)
- MLA: (2/b) * S * H (2 d_c + d_s) / (d_c + d_s)  (~2H: DeepSeek-V3 241.8, Kimi K3 181.3 FLOP/B)
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.specs.model import ModelSpec

FP8_MLA_BYTES_PER_TOKEN_LAYER = 656  # FlashMLA FP8 layout: 512 FP8 + 4 fp32 scales + 64 BF16 RoPE


def gqa_decode_intensity(
    heads: int, kv_heads: int, s_query: int = 1, kv_bytes_per_elem: float = 2.0
) -> float:
    """FLOP per HBM byte of GQA decode attention (MHA: kv_heads = heads; MQA: kv_heads = 1)."""
    return 2.0 / kv_bytes_per_elem * s_query * heads / kv_heads


def mla_decode_intensity(
    heads: int,
    kv_lora_rank: int,
    rope_dim: int,
    s_query: int = 1,
    kv_bytes_per_token: float | None = None,
) -> float:
    """FLOP per HBM byte of absorbed MLA decode: pairs cost 2H(2 d_c + d_s), a token d_c + d_s."""
    flops_per_token = 2.0 * heads * (2 * kv_lora_rank + rope_dim) * s_query
    if kv_bytes_per_token is None:
        kv_bytes_per_token = 2.0 * (kv_lora_rank + rope_dim)
    return flops_per_token / kv_bytes_per_token


def model_decode_intensity(
    model: ModelSpec, s_query: int = 1, kv_dtype: str = "bf16", rope: bool = True
) -> float:
    """Decode-attention AI of a catalog model in its own attention family."""
    if model.attention == "mla":
        m = model.mla_spec
        ds = m.qk_rope_head_dim if rope else 0
        per_token = None
        if kv_dtype == "fp8":
            per_token = float(FP8_MLA_BYTES_PER_TOKEN_LAYER if rope else m.kv_lora_rank)
        return mla_decode_intensity(model.num_heads, m.kv_lora_rank, ds, s_query, per_token)
    b = 1.0 if kv_dtype == "fp8" else 2.0
    return gqa_decode_intensity(model.num_heads, model.gqa_spec.num_kv_heads, s_query, b)


@dataclass(frozen=True, kw_only=True)
class IntensityRow:
    family: str
    heads: int
    kv_heads: int
    s_query: int
    flop_per_byte: float


def family_table(
    heads: int, gqa_kv_heads: int, mla_dims: tuple[int, int], max_s: int = 4
) -> list[IntensityRow]:
    """MHA, GQA, MQA and MLA decode AI side by side for one head count, S = 1..max_s (BF16)."""
    rows: list[IntensityRow] = []
    for s in range(1, max_s + 1):
        for family, kvh in (("MHA", heads), ("GQA", gqa_kv_heads), ("MQA", 1)):
            rows.append(
                IntensityRow(
                    family=family,
                    heads=heads,
                    kv_heads=kvh,
                    s_query=s,
                    flop_per_byte=gqa_decode_intensity(heads, kvh, s),
                )
            )
        d_c, d_s = mla_dims
        rows.append(
            IntensityRow(
                family="MLA",
                heads=heads,
                kv_heads=1,
                s_query=s,
                flop_per_byte=mla_decode_intensity(heads, d_c, d_s, s),
            )
        )
    return rows
