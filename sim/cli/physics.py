"""`mlasim cost` and `mlasim ai`: the cost model's MLA physics from the shell."""

from __future__ import annotations

import json
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Table

from sim.catalog import gpu_names, load_model, model_names
from sim.cli.common import JsonFlag, gpu_arg, model_arg, output_console, usage_error
from sim.cost import mla
from sim.cost.dispatch import PATH_NAMES, Segments, choose_paths, policy_names
from sim.cost.intensity import gqa_decode_intensity, model_decode_intensity
from sim.cost.memory import kv_bytes_per_token_layer


def cost(
    model: Annotated[
        str, typer.Option(help=f"Catalog model ({', '.join(model_names())}) or config.json path.")
    ],
    q: Annotated[int, typer.Option(help="New tokens computed in this forward (1 = decode).")],
    kv: Annotated[int, typer.Option(help="Cached tokens after the forward, new ones included.")],
    no_rope: Annotated[
        bool, typer.Option("--no-rope", metavar="", help="Leave out the shared RoPE dims.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Absorb vs expand FLOPs, bytes and intensity of one MLA layer; what each policy picks."""
    console = output_console()
    spec = model_arg(model)
    if spec.attention != "mla":
        raise usage_error(
            f"{spec.name} uses {spec.attention.upper()} attention; `cost` compares MLA paths"
        )
    if q < 1 or kv < q:
        raise usage_error(f"need 1 <= q <= kv (got q={q}, kv={kv}): --kv counts the new tokens too")
    m, h, rope = spec.mla_spec, spec.num_heads, not no_rope
    per_token = kv_bytes_per_token_layer(spec, "bf16")
    paths = {
        "expand": (
            mla.expand_flops(m, q, kv, heads=h, rope=rope),
            mla.expand_bytes(m, kv, heads=h, kv_bytes_per_token=per_token, rope=rope),
        ),
        "absorb": (
            mla.absorb_flops(m, q, kv, heads=h, rope=rope),
            mla.absorb_bytes(m, kv, kv_bytes_per_token=per_token, rope=rope),
        ),
    }
    seg = Segments(
        new_tokens=np.array([q]), kv_tokens=np.array([kv]), is_decode=np.array([q == 1 < kv])
    )
    sparse = spec.dsa is not None
    out: dict[str, Any] = {
        name: {"flops": float(f), "bytes": float(b), "flop_per_byte": float(f) / float(b)}
        for name, (f, b) in paths.items()
    }
    out["cheaper"] = "expand" if out["expand"]["flops"] < out["absorb"]["flops"] else "absorb"
    out["crossover_q"] = float(mla.crossover_q(m, kv))
    out["policies"] = {
        p: PATH_NAMES[int(choose_paths(p, spec, seg, sparse=sparse)[0])] for p in policy_names()
    }
    out.update(model=spec.name, q=q, kv=kv, rope=rope, heads=h)
    if as_json:
        print(json.dumps(out, indent=2))
        return
    t = Table(
        title=f"{spec.name}: one MLA layer, {q} new tokens, {kv} cached "
        f"({'with' if rope else 'no'} RoPE)"
    )
    for col in ("path", "GFLOPs", "MB", "FLOP/B"):
        t.add_column(col, justify="right")
    for name in ("expand", "absorb"):
        r = out[name]
        t.add_row(
            name,
            f"{r['flops'] / 1e9:,.1f}",
            f"{r['bytes'] / 1e6:,.2f}",
            f"{r['flop_per_byte']:,.0f}",
        )
    console.print(t)
    console.print(
        f"cheaper by FLOPs: [bold]{out['cheaper']}[/bold]; crossover q* = "
        f"{out['crossover_q']:.1f} new tokens at this cache length"
    )
    console.print("policies: " + ", ".join(f"{p} -> {v}" for p, v in out["policies"].items()))


def ai(
    gpu: Annotated[
        str, typer.Option(help=f"GPU for the ridge point ({', '.join(gpu_names())}).")
    ] = "h200",
    as_json: JsonFlag = False,
) -> None:
    """Decode-attention arithmetic intensity of MHA/GQA/MQA/MLA at S = 1..4 beside the ridge."""
    console = output_console()
    g = gpu_arg(gpu)
    ridge = g.ridge_flop_per_byte
    rows: list[dict[str, Any]] = []
    for name in model_names():
        spec = load_model(name)
        own = spec.attention.upper()
        for s in range(1, 5):
            entries = [
                (
                    own + " (as built)",
                    spec.kv_heads if own == "GQA" else 1,
                    model_decode_intensity(spec, s),
                )
            ]
            entries += [
                (fam, kvh, gqa_decode_intensity(spec.num_heads, kvh, s))
                for fam, kvh in (("MHA", spec.num_heads), ("GQA-8", 8), ("MQA", 1))
            ]
            for fam, kvh, val in entries:
                rows.append(
                    {
                        "model": name,
                        "family": fam,
                        "heads": spec.num_heads,
                        "kv_heads": kvh,
                        "s_query": s,
                        "flop_per_byte": val,
                        "bound": "compute" if val >= ridge else "memory",
                    }
                )
    if as_json:
        print(json.dumps({"gpu": g.name, "ridge_flop_per_byte": ridge, "rows": rows}, indent=2))
        return
    t = Table(title=f"Decode attention AI (BF16 KV), {g.display_name} ridge {ridge:.0f} FLOP/B")
    for col in ("model", "family", "S=1", "S=2", "S=3", "S=4"):
        t.add_column(col, justify="right")
    keyed: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        cell = f"{r['flop_per_byte']:.1f}" + ("*" if r["bound"] == "compute" else "")
        keyed.setdefault((r["model"], r["family"]), []).append(cell)
    for (mname, fam), cells in keyed.items():
        t.add_row(mname, fam, *cells)
    console.print(t)
    console.print("* compute-bound on this GPU (AI above the ridge)")


def register(app: typer.Typer) -> None:
    """Add `cost` and `ai` to the `mlasim` app."""
    app.command()(cost)
    app.command()(ai)
