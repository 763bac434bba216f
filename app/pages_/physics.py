"""Physics page: why MLA decodes by absorbing and prefills by expanding, and where GPUs bind.

Three views, each straight from `sim.cost`: absorb vs expand FLOPs over new tokens with the
crossover; decode-attention arithmetic intensity of MHA/GQA/MQA/MLA on a roofline, MTP S = 1..4;
DSA sparse attention and its indexer against context length.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import streamlit as st

from app import charts, components
from sim.api import (
    BatchShape,
    IntensityRow,
    ServingCostModel,
    family_table,
    mla,
    model_decode_intensity,
)
from sim.specs import Deployment, GpuSpec, ModelSpec

GFLOP = 1e9
LONG_CONTEXT = 131072  # where the DSA read-outs are taken


def crossing_q(model: ModelSpec, prefix_tokens: int, q_max: int = 1 << 20) -> float | None:
    """New-token count where expand becomes cheaper than absorb after `prefix_tokens` (exact)."""
    m, h = model.mla_spec, model.num_heads

    def gap(q: float) -> float:  # absorb - expand; rises with q
        k = prefix_tokens + q
        return float(mla.absorb_flops(m, q, k, heads=h) - mla.expand_flops(m, q, k, heads=h))

    lo, hi = 1.0, float(q_max)
    if prefix_tokens <= 0 or gap(lo) >= 0 or gap(hi) <= 0:
        return None
    for _ in range(80):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if gap(mid) < 0 else (lo, mid)
    return (lo + hi) / 2


def absorb_expand_series(
    model: ModelSpec, prefix_tokens: int, q_max: int = 65536
) -> dict[str, np.ndarray]:
    """GFLOPs per layer of both paths for q = 1..q_max new tokens after a prefix."""
    m, h = model.mla_spec, model.num_heads
    q = np.unique(np.logspace(0, np.log10(q_max), 160).round())
    k = prefix_tokens + q
    return {
        "q": q,
        "expand": np.asarray(mla.expand_flops(m, q, k, heads=h)) / GFLOP,
        "absorb": np.asarray(mla.absorb_flops(m, q, k, heads=h)) / GFLOP,
    }


HYPOTHETICAL_MLA = "MLA (hypothetical latent)"  # DeepSeek's latent under a GQA model's heads


def roofline_points(model: ModelSpec, gqa_kv_heads: int, kv_dtype: str) -> list[IntensityRow]:
    """MHA/GQA/MQA/MLA decode AI at S = 1..4 for the model's head count (MLA in `kv_dtype`)."""
    if model.attention == "mla":
        dims = (model.mla_spec.kv_lora_rank, model.mla_spec.qk_rope_head_dim)
    else:
        dims = (512, 64)  # DeepSeek's latent, shown for comparison with a GQA model
    rows = family_table(model.num_heads, gqa_kv_heads, dims, max_s=4)
    if model.attention != "mla":  # the model has no latent: say the MLA points are made up
        return [replace(r, family=HYPOTHETICAL_MLA) if r.family == "MLA" else r for r in rows]
    if kv_dtype != "fp8":
        return rows
    return [
        replace(r, flop_per_byte=model_decode_intensity(model, r.s_query, "fp8"))
        if r.family == "MLA" else r
        for r in rows
    ]  # fmt: skip


def _dsa_cost_models(model: ModelSpec, gpu: GpuSpec) -> dict[str, ServingCostModel]:
    """Cost models of one-GPU attention ranks with DSA on and off, on the fewest nodes that fit."""
    for nodes in (1, 2, 4, 8):
        try:
            return {
                mode: ServingCostModel(
                    model,
                    gpu,
                    Deployment(name=f"dsa-{mode}", nodes=nodes, dsa=mode),
                )
                for mode in ("on", "off")
            }
        except ValueError:
            continue  # weights do not fit on this many GPUs: spread the experts wider
    raise ValueError(f"{model.name} does not fit on 64 x {gpu.name}")


def dsa_series(model: ModelSpec, gpu: GpuSpec, context: np.ndarray) -> dict[str, np.ndarray]:
    """Decode time per layer (µs, one request, one query token) from the step-cost model."""
    costs = _dsa_cost_models(model, gpu)
    layers = model.attention_layers
    out: dict[str, list[float]] = {
        k: [] for k in ("dense attention", "sparse attention", "indexer")
    }
    for L in context.astype(np.int64):
        batch = BatchShape(
            num_ranks=costs["on"].deployment.attn_dp,
            rank=np.zeros(1, dtype=np.int64),
            new_tokens=np.ones(1, dtype=np.int64),
            kv_tokens=np.array([L]),
            is_decode=np.ones(1, dtype=bool),
        )
        on, off = costs["on"].step_cost(batch).ops, costs["off"].step_cost(batch).ops
        out["dense attention"].append(off["attn_decode"].seconds)
        out["sparse attention"].append(on["attn_decode"].seconds)
        out["indexer"].append(on["dsa_indexer"].seconds)
    series = {k: np.asarray(v) * 1e6 / layers for k, v in out.items()}
    series["sparse + indexer"] = series["sparse attention"] + series["indexer"]
    return series


def _section_crossover(model: ModelSpec) -> None:
    st.subheader("Absorb vs expand")
    c1, c2 = st.columns(2)
    prefix = int(
        c1.number_input("cached prefix (tokens)", 0, 1 << 20, 32768, step=1024, key="phys_prefix")
    )
    q_probe = int(c2.number_input("new tokens q (read-out)", 1, 1 << 20, 64, key="phys_q"))
    s = absorb_expand_series(model, prefix)
    crossing = crossing_q(model, prefix)
    m, h = model.mla_spec, model.num_heads
    k_probe = prefix + q_probe
    exp_g = float(mla.expand_flops(m, q_probe, k_probe, heads=h)) / GFLOP
    abs_g = float(mla.absorb_flops(m, q_probe, k_probe, heads=h)) / GFLOP
    cols = st.columns(4)
    cols[0].metric("expand GFLOPs / layer", f"{exp_g:,.1f}")
    cols[1].metric("absorb GFLOPs / layer", f"{abs_g:,.1f}")
    cols[2].metric("cheaper path", "expand" if exp_g < abs_g else "absorb")
    cols[3].metric("crossover q*", "none" if crossing is None else f"{crossing:,.0f}")
    st.plotly_chart(
        charts.absorb_vs_expand(
            s["q"], s["expand"], s["absorb"], prefix_tokens=prefix, crossover=crossing
        ),
        key="phys_fig_cross",
    )
    limit = float(mla.crossover_q(m, 1 << 30))
    st.caption(
        f"Closed form q* = a k / (a + (c - e) k) tends to {limit:.0f} for long caches and does "
        "not depend on the head count. With no prefix (plain prefill) expand is always cheaper; "
        "decode (q = 1) always absorbs."
    )


def _section_roofline(model: ModelSpec, gpu: GpuSpec) -> None:
    st.subheader("Decode attention on the roofline")
    c1, c2 = st.columns(2)
    kv_heads = int(
        c1.number_input("GQA KV heads", 1, model.num_heads, min(8, model.num_heads), key="phys_gqa")
    )
    kv_dtype = c2.radio("MLA KV dtype", ["bf16", "fp8"], horizontal=True, key="phys_kvdtype")
    pts = roofline_points(model, kv_heads, kv_dtype)
    st.plotly_chart(
        charts.roofline(
            peak_tflops=gpu.bf16_tflops,
            bandwidth_tb_s=gpu.hbm_tb_s,
            gpu_label=gpu.display_name,
            points=pts,
        ),
        key="phys_fig_roof",
    )
    ridge = gpu.ridge_flop_per_byte
    mla = "MLA" if model.attention == "mla" else HYPOTHETICAL_MLA
    mla_pts = [p for p in pts if p.family == mla]
    first_bound = next((p.s_query for p in mla_pts if p.flop_per_byte >= ridge), None)
    cols = st.columns(3)
    cols[0].metric("ridge point", f"{ridge:.0f} FLOP/B")
    cols[1].metric(f"{mla} decode AI (S=1)", f"{mla_pts[0].flop_per_byte:.1f} FLOP/B")
    cols[2].metric(
        f"{mla} compute-bound from", "S > 4" if first_bound is None else f"S = {first_bound}"
    )
    if model.attention != "mla":
        st.caption(
            f"{model.name} uses {model.attention.upper()} attention: its MLA points are "
            f"hypothetical, DeepSeek's 512 + 64 latent under its {model.num_heads} heads, for "
            "comparison."
        )
    st.dataframe(
        [
            {
                "family": p.family,
                "S": p.s_query,
                "KV heads": p.kv_heads,
                "FLOP/byte": round(p.flop_per_byte, 1),
                "bound": "compute" if p.flop_per_byte >= ridge else "memory",
            }
            for p in pts
        ],
        hide_index=True,
        key="phys_table_roof",
    )


@st.cache_data(show_spinner=False, max_entries=16)
def _dsa_cached(
    model_json: str, gpu_json: str, context: tuple[float, ...]
) -> dict[str, list[float]]:
    model, gpu = ModelSpec.model_validate_json(model_json), GpuSpec.model_validate_json(gpu_json)
    return {k: v.tolist() for k, v in dsa_series(model, gpu, np.asarray(context)).items()}


def _section_dsa(model: ModelSpec, gpu: GpuSpec) -> None:
    st.subheader("DSA: sparse attention and its indexer")
    if model.dsa is None:
        st.info(f"{model.name} has no DSA indexer; pick deepseek-v3.2 to see sparse attention.")
        return
    topk = model.dsa.index_topk
    grid = np.logspace(np.log10(256), np.log10(model.max_position_tokens), 60).round()
    context = np.unique(np.concatenate([grid, [topk, LONG_CONTEXT]]))
    try:
        series = _dsa_cached(
            model.model_dump_json(), gpu.model_dump_json(), tuple(context.tolist())
        )
    except ValueError as exc:
        components.show_error(exc, "Cannot price DSA on this GPU:")
        return
    st.plotly_chart(
        charts.dsa_cost(
            context, series, unit=f"µs per layer on {gpu.display_name} (roofline)", topk=topk
        ),
        key="phys_fig_dsa",
    )
    m, h, long = model.mla_spec, model.num_heads, LONG_CONTEXT

    def absorb_gflops(pairs: float | None = None) -> float:
        return float(mla.absorb_flops(m, 1, long, heads=h, pairs=pairs)) / GFLOP

    ideal = absorb_gflops(float(mla.sparse_pairs(1, long, topk)))
    priced = absorb_gflops(float(mla.sparse_slots(1, topk)))
    i_long = int(np.argmin(np.abs(context - long)))
    cols = st.columns(4)
    cols[0].metric("dense absorb @128K", f"{absorb_gflops():,.2f} GFLOPs")
    cols[1].metric(
        "sparse absorb @128K, ideal",
        f"{ideal:,.2f} GFLOPs",
        help="min(L, top-k) pairs per query token: the least work any kernel must do.",
    )
    cols[2].metric(
        "sparse absorb @128K, priced",
        f"{priced:,.2f} GFLOPs",
        help=f"All {topk} top-k slots per query token, valid or not, as FlashMLA's sparse kernel "
        "visits them: what the cost model prices.",
    )
    cols[3].metric(
        f"indexer share of sparse decode @{context[i_long] / 1024:.0f}K",
        f"{series['indexer'][i_long] / series['sparse + indexer'][i_long]:.0%}",
    )
    st.caption(
        f"Sparse attention is flat past top-k = {topk}, but the indexer scores every cached token, "
        "so long-context decode still grows with L. Below L = top-k the ideal work shrinks with L "
        f"while the kernel still visits all {topk} slots, so the priced work stays flat there too. "
        "Times are one request, one query token, one layer, priced by the step-cost model on the "
        "datasheet roofline."
    )


def render() -> None:
    st.title("Physics")
    c1, c2 = st.columns(2)
    with c1:
        picked = components.model_picker("phys_model", default="deepseek-v3.2", allow_upload=False)
    with c2:
        gpu = components.gpu_picker("phys_gpu")
    if picked is None:
        return
    model = picked[1]
    if model.attention == "mla":
        _section_crossover(model)
    else:
        st.info(
            f"{model.name} uses {model.attention.upper()}: absorb vs expand applies to MLA only."
        )
    _section_roofline(model, gpu)
    _section_dsa(model, gpu)
