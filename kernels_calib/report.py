"""`python -m kernels_calib report PROFILE`: a profile beside the seeds' claims and the roofline.

Claims checked (seed articles): absorb/expand crossover ~171 new tokens for long prefixes; an
absorbed pair costs ~3.4x an expanded one; MLA decode sits near the roofline ridge (~242 FLOP/B
for DeepSeek-V3). Each is shown from the formula and, where the profile has the tables, measured.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from sim.catalog import load_gpu
from sim.catalog.profiles import load_profile
from sim.cost import mla
from sim.cost.intensity import mla_decode_intensity
from sim.specs.gpu import GpuSpec
from sim.specs.profile import OpTable, Profile

SEED_CROSSOVER = 171
SEED_PAIR_RATIO = 3.4
SEED_DECODE_AI = 242


def efficiency(table: OpTable, gpu: GpuSpec) -> list[float]:
    """roofline time / latency per point (comm ops: against the table's link)."""
    peak = gpu.peak_flops_per_s(table.dtype)
    bw = table.link_bytes_per_s or gpu.hbm_bytes_per_s
    return [max(p.flops / peak, p.hbm_bytes / bw) / (p.latency_us_p50 * 1e-6) for p in table.points]


def _per_pair_seconds(profile: Profile, op: str, pairs_of: dict[str, str]) -> float | None:
    """Fastest time per (query, key) pair and head over the op's points."""
    best = None
    for t in profile.tables:
        if t.op != op or t.key.get("kv_dtype", "bf16") != "bf16":
            continue
        for p in t.points:
            a = {**t.key, **p.at}
            q, k = float(a[pairs_of["q"]]), float(a[pairs_of["k"]]) + float(a.get("prefix_len", 0))
            pairs = float(mla.causal_pairs(q, k)) * float(a.get("batch", 1)) * float(a["heads"])
            per = p.latency_us_p50 * 1e-6 / pairs
            best = per if best is None else min(best, per)
    return best


def claims(profile: Profile, gpu: GpuSpec | None) -> Table:
    t = Table(title="Seed claims")
    for col in ("claim", "seed", "formula (this shape)", "this profile"):
        t.add_column(col)
    shape = profile.model_shape
    if shape is None:
        t.add_row("(no model shape: roofline profile)", "", "", "")
        return t
    m = shape.mla_spec()
    formula = ", ".join(
        f"{float(mla.crossover_q(m, c.prefix_len_tokens)):.0f}" for c in profile.crossover
    )
    measured = ", ".join(
        f"{c.prefix_len_tokens}: {c.crossover_new_tokens:.0f}"
        if c.crossover_new_tokens
        else f"{c.prefix_len_tokens}: {c.status}"
        for c in profile.crossover
    )
    long_prefix = float(mla.crossover_q(m, 1 << 20))
    t.add_row(
        "absorb/expand crossover, new tokens (per prefix)",
        f"~{SEED_CROSSOVER}",
        formula or f"{long_prefix:.0f} (long prefix)",
        measured or "no crossover timed",
    )
    ratio = mla.absorb_pair_flops(m, 1) / mla.expand_pair_flops(m, 1)
    absorb = _per_pair_seconds(profile, "mla_decode", {"q": "s_q", "k": "kv_len"})
    expand = _per_pair_seconds(profile, "mla_prefill", {"q": "seq_len", "k": "seq_len"})
    timed = f"{absorb / expand:.2f}x (fastest time per pair)" if absorb and expand else "n/a"
    t.add_row("absorb / expand cost per pair", f"~{SEED_PAIR_RATIO}x", f"{ratio:.2f}x FLOPs", timed)
    ai = mla_decode_intensity(shape.heads, m.kv_lora_rank, m.qk_rope_head_dim)
    ridge = f"ridge {gpu.ridge_flop_per_byte:.0f}" if gpu else "ridge n/a"
    points = [
        p.flops / p.hbm_bytes
        for tb in profile.tables
        if tb.op == "mla_decode" and tb.key.get("s_q") == 1 and tb.key.get("kv_dtype") == "bf16"
        for p in tb.points
    ]
    table_ai = f"{max(points):.0f} FLOP/B at the longest context; {ridge}" if points else ridge
    t.add_row(
        "MLA decode intensity (S=1, BF16)",
        f"~{SEED_DECODE_AI} FLOP/B",
        f"{ai:.1f} FLOP/B ({shape.heads} heads)",
        table_ai,
    )
    return t


def by_op(profile: Profile, gpu: GpuSpec, every_table: bool) -> Table:
    t = Table(title="Measured vs roofline (efficiency = roofline time / latency)")
    for col in (
        "op" if not every_table else "op / key",
        "tables",
        "points",
        "impl",
        "eff median",
        "eff min-max",
        "best TFLOP/s",
        "best GB/s",
    ):
        t.add_column(col)
    groups: dict[str, list[OpTable]] = defaultdict(list)
    for tb in profile.tables:
        groups[f"{tb.op} {tb.key}" if every_table else tb.op].append(tb)
    for label, tables in groups.items():
        effs = [e for tb in tables for e in efficiency(tb, gpu)]
        pts = [p for tb in tables for p in tb.points]
        t.add_row(
            label,
            str(len(tables)),
            str(len(pts)),
            ", ".join(sorted({tb.impl for tb in tables})),
            f"{statistics.median(effs):.3f}",
            f"{min(effs):.3f}-{max(effs):.3f}",
            f"{max(p.achieved_tflop_s for p in pts):.1f}",
            f"{max(p.achieved_gb_s for p in pts):.0f}",
        )
    return t


def render(profile: Profile, console: Console, gpu_name: str | None, every_table: bool) -> None:
    name = gpu_name or profile.device.gpu
    gpu = load_gpu(name) if name else None
    head = Table(title=f"Profile {profile.name} ({profile.kind})", show_header=False)
    d, s = profile.device, profile.model_shape
    rows = [
        ("device", f"{d.name} (catalog GPU: {name or 'none'})"),
        ("driver / torch", f"{d.driver or '-'} / {d.torch_version or '-'}"),
        ("libraries", ", ".join(f"{k} {v}" for k, v in d.libraries.items()) or "-"),
        (
            "model shape",
            f"{s.model}: {s.heads} heads, latent {s.kv_lora_rank}, rope "
            f"{s.qk_rope_head_dim}, qk {s.qk_nope_head_dim}, v {s.v_head_dim}"
            if s
            else "-",
        ),
        (
            "tables / points",
            f"{len(profile.tables)} / {sum(len(t.points) for t in profile.tables)}",
        ),
        ("created", profile.created_utc or "-"),
    ]
    for k, v in rows:
        head.add_row(k, v)
    console.print(head)
    console.print(claims(profile, gpu))
    if profile.tables and gpu is not None:
        console.print(by_op(profile, gpu, every_table))
    factors = Table(title="Roofline factors (ops without a table)")
    for col in ("factor", "value", "source"):
        factors.add_column(col)
    for key, f in profile.roofline:
        if f is None:
            factors.add_row(key, "-", "none: the attention factor serves")
        else:
            factors.add_row(key, f"{f.value:.3g}", f.source)
    console.print(factors)
    flagged = [n for n in profile.notes if "FAILED" in n or "not timed" in n or "raised" in n]
    console.print(f"{len(profile.notes)} notes" + (":" if flagged else ""))
    for note in flagged:
        console.print(f"  {note}")


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m kernels_calib report", description=__doc__)
    p.add_argument("profile", help="catalog profile name or JSON path")
    p.add_argument("--gpu", default=None, help="catalog GPU for the roofline (default: profile's)")
    p.add_argument("--all", action="store_true", help="one row per table (default up to 40)")
    args = p.parse_args(list(argv))
    console = Console(width=None if sys.stdout.isatty() else 150)
    profile = load_profile(args.profile)
    render(profile, console, args.gpu, args.all or len(profile.tables) <= 40)
    return 0
