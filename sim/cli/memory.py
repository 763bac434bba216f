"""`mlasim memory`: where one GPU's HBM goes for a layout given as options, and whether it fits.

Errors speak in option words (`--gpus`, `--moe-tp`, `--weight-dtype`): the deployment's own
validation and `sim.cost.memory.plan_memory`'s refusal are translated, and a refusal lists the
single changes that were tried and would fit.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.table import Table

from sim.cli.common import JsonFlag, gpu_arg, model_arg, output_console, usage_error
from sim.cost.memory import MemoryPlan, plan_memory
from sim.specs.deployment import Deployment
from sim.specs.gpu import GB, GIB, GpuSpec
from sim.specs.model import ModelSpec

# Deployment fields set from `mlasim memory` options, to name the option in an error
MEMORY_OPTIONS = {
    "nodes": "--gpus",
    "gpus_per_node": "--gpus-per-node",
    "attn_tp": "--attn-tp",
    "moe_ep": "--moe-ep",
    "moe_tp": "--moe-tp",
    "dense_ffn": "--dense-ffn",
    "lm_head": "--lm-head",
    "eplb_redundant_experts": "--eplb-redundant-experts",
    "kv_dtype": "--kv-dtype",
    "weight_dtype": "--weight-dtype",
    "mtp_draft_tokens": "--mtp",
    "dsa": "--dsa",
    "mem_fraction": "--mem-fraction",
    "activation_reserve_gb": "--activation-reserve-gb",
}


def _option_line(msg: str, field: str | None) -> str:
    """`--option: message`; a cross-field check names its field first ('attn_tp=3 must ...').
    Node counts read as the CLI gives them: '(1 node of 8)' is just --gpus, dropped."""
    subject = field or msg.split("=", 1)[0]
    option = MEMORY_OPTIONS.get(subject, subject if field else "")
    msg = re.sub(r" \(1 node of \d+\)", "", msg)
    return f"{option}: {msg}" if option else msg


def _options_message(exc: ValidationError) -> str:
    """One `--option: message` line per error, without pydantic's input dump and link."""
    return "\n".join(
        _option_line(
            str(err["msg"]).removeprefix("Value error, "),
            str(err["loc"][0]) if err["loc"] else None,
        )
        for err in exc.errors()
    )


def _nodes(gpus: int, gpus_per_node: int) -> dict[str, int]:
    """The Deployment fields of a unit of `gpus` GPUs: one node if it fits in one."""
    per_node = min(gpus, gpus_per_node)
    return {"nodes": gpus // per_node, "gpus_per_node": per_node}


def _check_counts(gpus: int, gpus_per_node: int, moe_tp: int, moe_ep: int | None) -> None:
    """Exit 2 on GPU counts the options cannot lay out, before any arithmetic on them."""
    ep = 1 if moe_ep is None else moe_ep
    counts = {"--gpus": gpus, "--gpus-per-node": gpus_per_node, "--moe-tp": moe_tp, "--moe-ep": ep}
    for option, n in counts.items():
        if n < 1:
            raise usage_error(f"{option} {n}: a count of GPUs, at least 1; e.g. {option} {-n or 1}")
    per_node = min(gpus, gpus_per_node)
    if gpus % per_node:
        raise usage_error(
            f"--gpus {gpus} is not a whole number of {per_node}-GPU nodes (--gpus-per-node "
            f"{gpus_per_node}); use a multiple of {per_node}, "
            f"e.g. --gpus {gpus + per_node - gpus % per_node}"
        )
    if gpus % moe_tp:
        divisors = ", ".join(str(d) for d in range(1, gpus + 1) if gpus % d == 0)
        raise usage_error(f"--moe-tp {moe_tp} must divide --gpus {gpus}; pick one of {divisors}")
    if moe_ep is not None and moe_ep * moe_tp != gpus:
        raise usage_error(
            f"--moe-ep {moe_ep} x --moe-tp {moe_tp} = {moe_ep * moe_tp} must equal --gpus {gpus}; "
            f"use --moe-ep {gpus // moe_tp} or leave it out (default: --gpus / --moe-tp)"
        )


def _first_fit(
    spec: ModelSpec, g: GpuSpec, dep: Deployment, tries: dict[str, dict[str, Any]]
) -> list[str]:
    """The first option (in order) whose changes to `dep` make its minimum KV fit, if any."""
    for option, changes in tries.items():
        try:
            plan_memory(spec, g, Deployment.model_validate({**dep.model_dump(), **changes}))
        except ValueError:  # pydantic's ValidationError included
            continue
        return [option]
    return []


def _does_not_fit(
    spec: ModelSpec, g: GpuSpec, dep: Deployment, plan: MemoryPlan, gpus_per_node: int
) -> str:
    """plan_memory's refusal in option words, with the single changes that would fit."""
    chunk = dep.chunked_prefill_tokens
    min_kv = chunk * plan.kv_bytes_per_token_per_gpu
    need = plan.weights_bytes_per_gpu + plan.activation_reserve_bytes_per_gpu + min_kv
    more = [n * dep.gpus for n in (2, 4, 8)]  # EP grows with the unit (moe_ep to its default)
    fixes = _first_fit(
        spec, g, dep, {f"--gpus {n}": {**_nodes(n, gpus_per_node), "moe_ep": None} for n in more}
    )
    dtypes = ("bf16", "fp8", "fp4")
    lighter = dtypes[dtypes.index(dep.weight_dtype) + 1 :]
    fixes += _first_fit(spec, g, dep, {f"--weight-dtype {w}": {"weight_dtype": w} for w in lighter})
    fraction = math.ceil(need / g.hbm_bytes * 100) / 100
    fixes += [f"--mem-fraction {fraction:.2f}"] if fraction <= 1.0 else []
    fix = "to fit, use " + " or ".join([", ".join(fixes[:-1]), fixes[-1]] if fixes[1:] else fixes)
    if not fixes:
        fix = "no single change of --gpus (up to 8x), --weight-dtype or --mem-fraction fits: "
        fix += "combine them, or lower --activation-reserve-gb"
    usable = plan.usable_bytes_per_gpu
    return (
        f"{spec.name} does not fit on {dep.gpus} x {g.display_name}: each GPU "
        f"needs weights {plan.weights_bytes_per_gpu / GB:.1f} GB + activation reserve "
        f"{plan.activation_reserve_bytes_per_gpu / GB:.1f} GB + KV of one {chunk:,}-token "
        f"prefill chunk {min_kv / GB:.2f} GB = {need / GB:.1f} GB, {(need - usable) / GB:.1f} GB "
        f"more than the {usable / GB:.1f} GB that --mem-fraction {dep.mem_fraction} leaves of "
        f"the {g.hbm_bytes / GB:.1f} GB ({g.hbm_bytes / GIB:.1f} GiB) one GPU exposes; {fix}"
    )


MEM_FRACTION_HELP = "Share of usable memory (`mlasim gpus`) for weights + KV + activations."
RESERVE_HELP = (
    "GB (1e9 B) per GPU kept for activations and buffers, out of --mem-fraction "
    "(default: sized from the largest prefill chunk and the decode graphs)."
)
MOE_TP_MORE = " 1: experts split by EP alone; --attn-tp 8 --moe-tp 8: a TP8 deployment."
PER_NODE_HELP = "GPUs per node: a larger --gpus spans whole nodes; attention TP stays in one."


def _spec_option(field: str, *decls: str, more: str = "") -> Any:
    """An option whose help is the Deployment field's description: one source for both."""
    return typer.Option(*decls, help=f"{Deployment.model_fields[field].description}{more}")


def memory(
    model: Annotated[str, typer.Option(help="Catalog model or config.json path.")],
    gpu: Annotated[str, typer.Option(help="Catalog GPU.")],
    gpus: Annotated[
        int, typer.Option(help="GPUs in the unit (one EP group): up to a node, or whole nodes.")
    ],
    attn_tp: Annotated[
        int, typer.Option("--attn-tp", help="Attention TP size (1 = DP attention).")
    ],
    moe_tp: Annotated[int, _spec_option("moe_tp", "--moe-tp", more=MOE_TP_MORE)] = 1,
    moe_ep: Annotated[
        int | None,
        typer.Option("--moe-ep", help="Expert-parallel size (default: --gpus / --moe-tp)."),
    ] = None,
    kv_dtype: Annotated[str, typer.Option("--kv-dtype", help="bf16 or fp8.")] = "bf16",
    weight_dtype: Annotated[
        str | None,
        typer.Option("--weight-dtype", help="bf16, fp8 or fp4 (default: the checkpoint's)."),
    ] = None,
    mtp: Annotated[int, typer.Option(help="MTP draft tokens (adds the MTP layer's KV).")] = 0,
    dense_ffn: Annotated[str, _spec_option("dense_ffn", "--dense-ffn")] = "tp",
    lm_head: Annotated[str, _spec_option("lm_head", "--lm-head")] = "rank",
    eplb_redundant_experts: Annotated[
        int, _spec_option("eplb_redundant_experts", "--eplb-redundant-experts")
    ] = 0,
    dsa: Annotated[str, _spec_option("dsa", more=" 'off' drops the indexer's KV.")] = "auto",
    mem_fraction: Annotated[float, typer.Option("--mem-fraction", help=MEM_FRACTION_HELP)] = 0.9,
    activation_reserve_gb: Annotated[
        float | None, typer.Option("--activation-reserve-gb", help=RESERVE_HELP)
    ] = None,
    gpus_per_node: Annotated[int, typer.Option("--gpus-per-node", help=PER_NODE_HELP)] = 8,
    as_json: JsonFlag = False,
) -> None:
    """Per-GPU weights, KV bytes per token, duplication factor and KV capacity."""
    spec, g = model_arg(model), gpu_arg(gpu)
    weight_dtype = weight_dtype or spec.weight_dtype  # a BF16 checkpoint is priced as BF16
    _check_counts(gpus, gpus_per_node, moe_tp, moe_ep)
    fields = dict(
        attn_tp=attn_tp, moe_tp=moe_tp, moe_ep=moe_ep, kv_dtype=kv_dtype,
        weight_dtype=weight_dtype, mtp_draft_tokens=mtp, dense_ffn=dense_ffn, lm_head=lm_head,
        eplb_redundant_experts=eplb_redundant_experts, dsa=dsa, mem_fraction=mem_fraction,
        activation_reserve_gb=activation_reserve_gb,
    )  # fmt: skip
    unit = {"name": "memory", **_nodes(gpus, gpus_per_node), "mtp_acceptance": (0.8,) * bool(mtp)}
    try:
        dep = Deployment.model_validate({**unit, **fields})
    except ValidationError as exc:
        raise usage_error(_options_message(exc)) from None
    try:
        plan = plan_memory(spec, g, dep, strict=False)
    except ValueError as exc:  # a layout the model cannot take (heads, DSA)
        raise usage_error(_option_line(str(exc), None)) from None
    try:
        plan_memory(spec, g, dep)  # strict: refuses when one prefill chunk's KV does not fit
    except ValueError:
        raise usage_error(_does_not_fit(spec, g, dep, plan, gpus_per_node)) from None
    page = dep.page_size_tokens
    in_pages = plan.kv_capacity_tokens_per_rank // page * page * dep.attn_dp
    out = {
        "model": spec.name, "gpu": g.name, "gpus": gpus, "attn_dp": dep.attn_dp,
        **dep.model_dump(include=set(fields)), "moe_ep": dep.ep, **asdict(plan),
        "kv_pool_bytes_per_gpu": plan.kv_pool_bytes_per_gpu, "page_size_tokens": page,
        "kv_capacity_tokens_total_whole_pages": in_pages,
    }  # fmt: skip
    if as_json:
        print(json.dumps(out, indent=2))
        return
    t = Table(
        title=f"{spec.name} on {gpus} x {g.display_name}, attention TP{attn_tp} x DP{dep.attn_dp}"
        f", experts EP{dep.ep} x TP{dep.moe_tp}",
        caption="GB = 10^9 bytes",
    )
    t.add_column("quantity")
    t.add_column("value", justify="right")
    for row in (
        (f"usable per GPU (--mem-fraction {dep.mem_fraction})",
         f"{plan.usable_bytes_per_gpu / GB:.1f} of {g.hbm_bytes / GB:.1f} GB"),
        (f"weights per GPU ({dep.weight_dtype})", f"{plan.weights_bytes_per_gpu / GB:.1f} GB"),
        ("activation reserve per GPU", f"{plan.activation_reserve_bytes_per_gpu / GB:.1f} GB"),
        (f"KV bytes per token per GPU ({dep.kv_dtype})",
         f"{plan.kv_bytes_per_token_per_gpu:,.0f} B"),
        ("KV duplication factor", f"{plan.kv_dup_factor}x"),
        ("KV capacity per GPU", f"{plan.kv_capacity_tokens_per_gpu:,} tokens"),
        ("distinct tokens the unit holds", f"{plan.kv_capacity_tokens_total:,}"),
        (f"  in whole {page}-token pages, as a run counts", f"{in_pages:,}"),
    ):  # fmt: skip
        t.add_row(*row)
    output_console().print(t)


def register(app: typer.Typer) -> None:
    """Add `memory` to the `mlasim` app."""
    app.command()(memory)
