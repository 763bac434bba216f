"""Per-GPU memory of each deployment, from `plan_memory` (no simulation needed).

A PD pair's two pools have layouts of their own, so each gets its own bar, named
`<pair>.prefill` and `<pair>.decode`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamlit as st

from app import charts
from sim.api import MemoryPlan, plan_memory
from sim.specs import Deployment, GpuSpec, ModelSpec, PdDeployment
from sim.specs.gpu import GB


def units(deployments: Sequence[Deployment | PdDeployment]) -> list[tuple[str, Deployment]]:
    """(bar label, unit layout) of every deployment, one per pool of a PD pair."""
    out: list[tuple[str, Deployment]] = []
    for d in deployments:
        if isinstance(d, PdDeployment):
            out += [(f"{d.name}.prefill", d.prefill), (f"{d.name}.decode", d.decode)]
        else:
            out.append((d.name, d))
    return out


def fit_problem(model: ModelSpec, gpu: GpuSpec, d: Deployment) -> str | None:
    """Why `d` does not fit `gpu` (the simulator's own check, with its fix), or None if it fits."""
    try:
        plan_memory(model, gpu, d)  # strict: raises when the minimum KV does not fit
    except ValueError as exc:
        return str(exc)
    return None


def unfit(
    model: ModelSpec, gpu: GpuSpec, deployments: Sequence[Deployment | PdDeployment]
) -> list[str]:
    """Names of the deployments (a PD pair when either pool) that do not fit `gpu`."""
    out: list[str] = []
    for d in deployments:
        pools = [d.prefill, d.decode] if isinstance(d, PdDeployment) else [d]
        if any(fit_problem(model, gpu, u) for u in pools):
            out.append(d.name)
    return out


def paged_tokens_total(plan: MemoryPlan, d: Deployment) -> int:
    """Distinct KV tokens in whole pages, as the run (and its KV cards) count them: each rank
    holds whole pages only."""
    per_rank = plan.kv_capacity_tokens_per_rank // d.page_size_tokens * d.page_size_tokens
    return per_rank * d.attn_dp * d.replicas


def memory_rows(
    model: ModelSpec, gpu: GpuSpec, deployments: Sequence[Deployment | PdDeployment]
) -> list[dict[str, Any]]:
    """GB per GPU by use, with duplicated KV split out (TP ranks store the latent once per GPU)."""
    rows = []
    for name, d in units(deployments):
        plan = plan_memory(model, gpu, d, strict=False)
        problem = fit_problem(model, gpu, d)
        pool = plan.kv_pool_bytes_per_gpu / GB
        unique = pool / plan.kv_dup_factor
        used = plan.weights_bytes_per_gpu / GB + plan.activation_reserve_bytes_per_gpu / GB + pool
        rows.append(
            {
                "name": name,
                "weights": plan.weights_bytes_per_gpu / GB,
                "activations": plan.activation_reserve_bytes_per_gpu / GB,
                "KV (unique)": unique,
                "KV (duplicated)": pool - unique,
                "free": max(gpu.hbm_bytes / GB - used, 0.0),
                "usable": plan.usable_bytes_per_gpu / GB,
                "kv_dup_factor": plan.kv_dup_factor,
                "kv_bytes_per_token_per_gpu": plan.kv_bytes_per_token_per_gpu,
                "kv_capacity_tokens_total": paged_tokens_total(plan, d),
                "fits": problem is None,
                "problem": problem,
            }
        )
    return rows


def hbm_note(gpu: GpuSpec, rows: Sequence[dict[str, Any]]) -> str:
    """'H200 SXM: 150.7 GB = 140.4 GiB of HBM, 135.7 GB usable': datasheets quote GiB as GB."""
    usable = "/".join(dict.fromkeys(f"{r['usable']:.1f}" for r in rows))
    return (
        f"{gpu.display_name}: {gpu.hbm_bytes / GB:.1f} GB = {gpu.hbm_bytes / 2**30:.1f} GiB of "
        f"HBM, {usable} GB usable"
    )


def render_memory(
    model: ModelSpec, gpu: GpuSpec, deployments: Sequence[Deployment | PdDeployment]
) -> None:
    """Stacked bars plus the facts that explain them (duplication factor, distinct capacity)."""
    rows = memory_rows(model, gpu, deployments)
    st.plotly_chart(charts.memory_bars(rows, hbm_note=hbm_note(gpu, rows)), key="mem_fig")
    st.dataframe(
        [
            {
                "deployment": r["name"],
                "KV dup factor": r["kv_dup_factor"],
                "KV bytes/token/GPU": round(r["kv_bytes_per_token_per_gpu"]),
                "distinct KV tokens (unit)": f"{r['kv_capacity_tokens_total']:,}",
                "fits": "yes" if r["fits"] else "NO",
            }
            for r in rows
        ],
        hide_index=True,
        key="mem_table",
    )
    for r in rows:
        if r["problem"]:  # name the bar unless the message already does
            named = repr(r["name"]) in r["problem"]
            st.warning(r["problem"] if named else f"{r['name']}: {r['problem']}")
