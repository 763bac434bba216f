"""`mlasim models`, `mlasim gpus`, `mlasim profiles`: the bundled catalog, as a table or JSON.

`register(app)` adds the three commands to the `mlasim` Typer app.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from sim.catalog import gpu_names, load_gpu, load_model, model_names
from sim.cli.common import JsonFlag, output_console
from sim.specs.gpu import GB, GIB, MIB

if TYPE_CHECKING:
    from sim.specs.profile import Profile


def _cell(v: Any) -> str:
    if v is None or v == {} or v is False:
        return "-"
    if v is True:
        return "yes"
    if isinstance(v, dict):
        return "; ".join(f"{k}: {x}" for k, x in v.items())
    return str(v)


# table headers of JSON keys that read badly as they are
LABELS = {
    "attention": "attn",
    "routed_experts": "experts",
    "experts_per_token": "top-k",
    "mtp_layers": "MTP",
    "dsa": "DSA",
    "bf16_tflops": "BF16 TFLOP/s",
    "fp8_tflops": "FP8 TFLOP/s",
    "hbm_gb": "datasheet HBM",
    "hbm_usable_mib": "usable MiB",
    "hbm_usable_gib": "usable GiB",
    "hbm_usable_gb": "usable GB (10^9 B)",
    "hbm_tb_s": "HBM TB/s",
    "ridge_flop_per_byte": "ridge FLOP/B",
    "nvlink_gb_s": "NVLink GB/s/dir",
    "nic_gb_s": "NIC GB/s",
    "crossover_new_tokens_by_prefix": "crossover (prefix: new tokens)",
}

# table cells of JSON values that need their unit or separators to read right
CELLS: dict[str, Callable[[Any], str]] = {
    "hbm_gb": lambda v: f"{v:g} GB",  # as the datasheet prints it
    "hbm_usable_mib": lambda v: f"{v:,}",
}


def _show(title: str, rows: list[dict[str, Any]], as_json: bool, caption: str = "") -> None:
    """Rows as a JSON array, or as a rich table with one column per key."""
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    t = Table(title=title, caption=caption or None)
    for i, col in enumerate(rows[0] if rows else ()):
        t.add_column(LABELS.get(col, col), no_wrap=i == 0)  # names stay whole
    for r in rows:
        t.add_row(*(CELLS.get(k, _cell)(v) for k, v in r.items()))
    output_console().print(t)


def models(as_json: JsonFlag = False) -> None:
    """The bundled model catalog."""
    rows = []
    for name in model_names():
        m = load_model(name)
        rows.append(
            {
                "name": name,
                "attention": m.attention,
                "layers": m.num_layers,
                "heads": m.num_heads,
                "routed_experts": m.moe.n_routed_experts,
                "experts_per_token": m.moe.experts_per_token,
                "mtp_layers": m.mtp_layers,
                "dsa": m.dsa is not None,
            }
        )
    _show("Models", rows, as_json)


def gpus(as_json: JsonFlag = False) -> None:
    """The bundled GPU catalog: datasheet peaks, and the memory each GPU exposes."""
    rows = []
    for name in gpu_names():
        g = load_gpu(name)
        rows.append(
            {
                "name": name,
                "bf16_tflops": g.bf16_tflops,
                "fp8_tflops": g.fp8_tflops,
                "hbm_gb": g.hbm_gb,
                # what deployments divide up (`mlasim memory`), in three units
                "hbm_usable_mib": round(g.hbm_bytes / MIB),
                "hbm_usable_gib": round(g.hbm_bytes / GIB, 1),
                "hbm_usable_gb": round(g.hbm_bytes / GB, 2),
                "hbm_tb_s": g.hbm_tb_s,
                "ridge_flop_per_byte": round(g.ridge_flop_per_byte, 1),
                # the links EP all-to-all (NVLink inside a node, NIC across) and PD KV use
                "nvlink_gb_s": g.nvlink_gb_s,
                "nic_gb_s": g.nic_gb_s,
            }
        )
    caption = (
        "datasheet HBM: capacity as published (its 'GB' is nearer GiB); usable: memory the "
        "device exposes (nvidia-smi memory.total, MiB), which `mlasim memory` and scenarios "
        "divide up and count in GB = 10^9 bytes"
    )
    _show("GPUs", rows, as_json, caption)


# op families `mlasim profiles` reports on (each the vocabulary's ops of that kind)
OP_FAMILIES = {
    "gemm": ("gemm",),
    "mla_bmm": ("bmm",),
    "mla_decode": ("mla_decode",),
    "mla_prefill": ("mla_prefill", "mla_prefill_chunked", "mla_extend_absorb", "mla_extend_expand"),
    "dsa": ("dsa_indexer_decode", "dsa_indexer_prefill", "dsa_attn_decode", "dsa_attn_prefill"),
    "moe": ("moe", "moe_up", "moe_down"),  # the fused `moe` table or both grouped GEMMs
    "collectives": ("all_reduce", "all_gather", "all_to_all"),
    "ep_comm": ("ep_dispatch", "ep_combine"),
    "elementwise": ("elementwise",),
}


def _stack(p: Profile) -> str:
    """What kind of kernels a profile's tables time."""
    if p.engine:
        return f"{p.engine} {p.engine_version} production kernels"
    if p.kind == "measured":
        return "torch + Triton stack timed by kernels_calib (not production kernels)"
    if p.kind == "published":
        return "published kernel benchmarks"
    return "datasheet roofline with published efficiencies"


def _families(p: Profile) -> dict[str, list[str]]:
    """Op families by where their times come from: the profile's kind where every op of the
    family has a table, 'partial' where some do, 'roofline' where none does."""
    tabled = {t.op for t in p.tables}
    out: dict[str, list[str]] = {p.kind: [], "partial": [], "roofline": []}
    for family, ops in OP_FAMILIES.items():
        have = sum(op in tabled for op in ops)
        whole = have == len(ops) or (family == "moe" and ("moe" in tabled or have == 2))
        out[p.kind if whole else "partial" if have else "roofline"].append(family)
    return {k: v for k, v in out.items() if v}


def profiles(as_json: JsonFlag = False) -> None:
    """The bundled calibration profiles: engine and version, what their kernels are, which op
    families are measured, published or roofline, tables and measured crossover."""
    from sim.catalog.profiles import load_profile, profile_names

    rows = []
    for name in profile_names():
        p = load_profile(name)
        crossover = {
            str(c.prefix_len_tokens): round(c.crossover_new_tokens)
            if c.crossover_new_tokens
            else c.status
            for c in p.crossover
        }
        families = _families(p)
        rows.append(
            {
                "name": name,
                "kind": p.kind,
                "gpu": p.device.gpu,
                "engine": p.engine or "-",
                "version": p.engine_version or "-",
                "stack": _stack(p),
                **{
                    k: ", ".join(families.get(k, [])) or "-"
                    for k in ("measured", "published", "partial", "roofline")
                },
                "tables": len(p.tables),
                "points": sum(len(t.points) for t in p.tables),
                "crossover_new_tokens_by_prefix": crossover,
            }
        )
    _show("Calibration profiles", rows, as_json)


def register(app: typer.Typer) -> None:
    for command in (models, gpus, profiles):
        app.command()(command)
