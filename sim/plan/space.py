"""The candidate layouts of a plan: every combination of the space's knob values, per GPU type.

A layout is one serving unit (a colocated `Deployment`) or one PD slice (a `PdDeployment` whose
pools hold `p` prefill and `d` decode units). A candidate is a layout times a replica count: the
plan serves the target with that many copies, each copy taking an equal share of the load
(`sim.plan.run` simulates one copy at its share). Replica counts are chosen by
`sim.plan.prune` from the roofline bound, so this module only lists layouts.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from sim.plan.spec import PlanRequest, PlanSpace
from sim.specs.gpu import GpuSpec
from sim.specs.model import ModelSpec

# GPUs with FP4 tensor cores (NVIDIA Blackwell datasheets): only they are offered FP4 weights.
FP4_GPUS = frozenset({"b200"})


@dataclass(frozen=True)
class Layout:
    """One unit or PD slice on one GPU type; `spec` is its deployment as JSON data."""

    gpu: str
    kind: str  # "unit" | "pd"
    spec: dict[str, Any]
    gpus: int  # GPUs in one copy (unit, or both pools of a slice)
    label: str


def checkpoint_dtype(model: ModelSpec) -> str:
    return model.weight_dtype


def weight_dtypes(space: PlanSpace, model: ModelSpec, gpu: GpuSpec) -> list[str]:
    """The space's weight dtypes (the checkpoint's when empty); FP4 only where the GPU has it."""
    wanted: list[str] = list(space.weight_dtype) or [checkpoint_dtype(model)]
    return [w for w in wanted if w != "fp4" or gpu.name in FP4_GPUS]


def _name(parts: list[str]) -> str:
    return "_".join(p for p in parts if p)


def unit_specs(req: PlanRequest, model: ModelSpec, gpu: GpuSpec, gpn: int) -> list[dict[str, Any]]:
    """Deployment data of every colocated unit the space describes (unchecked: pruning checks)."""
    s = req.space
    mtps = [m for m in s.mtp_draft_tokens if m == 0 or model.mtp_layers > 0]
    out = []
    for nodes, tp, moe, wd, kv, mtp, chunk, mrr in itertools.product(
        s.nodes, s.attn_tp, s.moe, weight_dtypes(s, model, gpu), s.kv_dtype, mtps,
        s.chunked_prefill_tokens, s.max_running_requests,
    ):  # fmt: skip
        gpus = nodes * gpn
        dp = gpus // tp if tp and gpus % tp == 0 else 0
        placements = s.placement if dp > 1 else ("rank",)
        overlaps = s.two_batch_overlap if moe == "ep" and gpus > 1 else (False,)
        for place, tbo in itertools.product(placements, overlaps):
            moe_tp = min(gpn, gpus) if moe == "tp" else 1
            spec: dict[str, Any] = {
                "name": _name([
                    f"tp{tp}dp{dp}", f"{moe}{gpus // moe_tp if moe == 'ep' else moe_tp}",
                    f"n{nodes}", f"w{wd}", f"kv{kv}", f"mtp{mtp}" if mtp else "",
                    "unit" if place == "unit" else "", "tbo" if tbo else "",
                    f"c{chunk}", f"r{mrr}",
                ]),
                "nodes": nodes, "gpus_per_node": gpn, "attn_tp": tp, "moe_tp": moe_tp,
                "dense_ffn": "unit" if place == "unit" else "tp",
                "lm_head": "unit" if place == "unit" else "rank",
                "weight_dtype": wd, "kv_dtype": kv, "mtp_draft_tokens": mtp,
                "two_batch_overlap": tbo, "chunked_prefill_tokens": chunk,
                "max_running_requests": mrr,
            }  # fmt: skip
            if mtp:
                spec["mtp_acceptance"] = [s.mtp_acceptance]
            if req.engine:
                spec["engine"] = req.engine
            out.append(spec)
    return out


def pd_specs(units: list[dict[str, Any]], space: PlanSpace) -> list[dict[str, Any]]:
    """PD slices: a prefill pool of single-node DP-attention EP units (no MTP: prefill drafts
    nothing) and a decode pool of each DP-attention EP unit, at each prefill : decode ratio.
    Both pools use the decode unit's KV and weight dtypes (the KV moves between them)."""
    if not space.pd:
        return []
    out = []
    for d in units:
        if d["attn_tp"] != 1 or d["moe_tp"] != 1 or d["dense_ffn"] == "unit":
            continue
        prefill = {
            **{k: v for k, v in d.items() if k not in ("mtp_draft_tokens", "mtp_acceptance")},
            "nodes": 1, "two_batch_overlap": False, "mtp_draft_tokens": 0,
        }  # fmt: skip
        for p, q in space.pd_ratios:
            out.append({
                "name": f"pd{p}x{q}_{d['name']}",
                "prefill": {**prefill, "name": "prefill", "replicas": p},
                "decode": {**d, "name": "decode", "replicas": q},
            })  # fmt: skip
    return out


def layouts(req: PlanRequest, model: ModelSpec, gpu: GpuSpec) -> list[Layout]:
    """Every layout of the space on `gpu`, units first."""
    gpn = gpu_node_size(gpu)
    units = unit_specs(req, model, gpu, gpn)
    out = [Layout(gpu.name, "unit", u, u["nodes"] * gpn, u["name"]) for u in units]
    for pd in pd_specs(units, req.space):
        gpus = sum(pd[k]["nodes"] * gpn * pd[k]["replicas"] for k in ("prefill", "decode"))
        out.append(Layout(gpu.name, "pd", pd, gpus, pd["name"]))
    return out


def gpu_node_size(gpu: GpuSpec) -> int:
    """GPUs per node of this type: the HGX/DGX baseboard's eight for every catalog GPU."""
    return 8
