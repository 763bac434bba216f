"""`python -m kernels_calib report PROFILE`: a profile beside the seeds' claims and the roofline.

Claims checked (seed articles): absorb/expand crossover ~171 new tokens for long prefixes; an
absorbed pair costs ~3.4x an expanded one; MLA decode sits near the roofline ridge (~242 FLOP/B
for DeepSeek-V3). Each is shown from the formula and, where the profile has the tables, measured.
A profile measured on a CPU says so first. Exit status 2 for a profile or GPU that cannot be
loaded, with one line naming it and what is known.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sim.catalog import CatalogError, load_gpu
from sim.catalog.profiles import load_profile
from sim.cost import mla
from sim.cost.intensity import mla_decode_intensity
from sim.specs.gpu import GpuSpec
from sim.specs.profile import CrossoverPoint, OpTable, Profile

SEED_CROSSOVER = 171
SEED_PAIR_RATIO = 3.4
SEED_DECODE_AI = 242
PROFILE_FILES = (
    "report reads profile JSON as `python -m kernels_calib --out FILE` writes it, or a bundled "
    "profile by name (mlasim profiles lists them)"
)
LONG_PREFIX_TOKENS = 1 << 20  # where the formula's crossover has reached its limit
# notes that mean something was not measured (the rest record checks passed and choices made)
FLAGS = ("FAILED", "not timed", "raised", "stopped", "not run", "aborted")


def flagged_notes(profile: Profile) -> list[str]:
    """Notes that say a kernel failed, a point or family was not timed, or the run stopped."""
    return [n for n in profile.notes if any(f in n for f in FLAGS)]


def measured_on_cpu(profile: Profile) -> bool:
    """kernels_calib names a CPU device 'cpu (<model>)'; a GPU keeps its driver's name."""
    return profile.device.name.lower().startswith("cpu")


def describe_crossover(c: CrossoverPoint) -> str:
    """'at prefix P: Q' where absorb and expand cross, else which was faster over the range."""
    where = f"at prefix {c.prefix_len_tokens}"
    if c.crossover_new_tokens is not None:
        return f"{where}: {c.crossover_new_tokens:.0f}"
    if not c.new_tokens:
        return f"{where}: no new-token counts timed"
    faster = "absorb" if c.status == "absorb_faster" else "expand"
    return f"{where}: {faster} faster at all {c.new_tokens[0]}-{c.new_tokens[-1]} new tokens timed"


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
    # the formula's crossover grows with the prefix toward the seed's long-prefix figure
    at_prefix = [
        f"at prefix {c.prefix_len_tokens}: {float(mla.crossover_q(m, c.prefix_len_tokens)):.0f}"
        for c in profile.crossover
    ]
    long_prefix = f"long-prefix limit {float(mla.crossover_q(m, LONG_PREFIX_TOKENS)):.0f}"
    measured = "; ".join(describe_crossover(c) for c in profile.crossover)
    t.add_row(
        "absorb/expand crossover, new tokens (per prefix)",
        f"~{SEED_CROSSOVER} (long prefix)",
        "; ".join([*at_prefix, long_prefix]),
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


def render(
    profile: Profile,
    console: Console,
    gpu: GpuSpec | None,
    every_table: bool,
    all_notes: bool = False,
) -> None:
    """Print the profile; `gpu` is the catalog GPU efficiencies are set against (None: none)."""
    name = gpu.name if gpu else None
    d, s = profile.device, profile.model_shape
    if measured_on_cpu(profile):
        console.print(
            f"[bold yellow]measured on CPU ({escape(d.name)}): efficiencies are not a GPU's[/] "
            f"(CPU times against {name or 'no GPU'}'s datasheet); simulate with a GPU's profile"
        )
    head = Table(title=f"Profile {profile.name} ({profile.kind})", show_header=False)
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
    shown = profile.notes if all_notes else flagged_notes(profile)
    n = len(profile.notes)
    if all_notes:
        console.print(f"{n} notes:")
    elif shown:
        console.print(
            f"{n} notes; {len(shown)} say something failed or was not timed (--notes: all):"
        )
    else:
        console.print(
            f"{n} notes, none says a kernel failed or was not timed (--notes prints them)"
        )
    for note in shown:
        console.print(f"  {note}", markup=False)


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m kernels_calib report", description=__doc__)
    p.add_argument("profile", help="catalog profile name or JSON path")
    p.add_argument("--gpu", default=None, help="catalog GPU for the roofline (default: profile's)")
    p.add_argument("--all", action="store_true", help="one row per table (default up to 40)")
    p.add_argument("--notes", action="store_true", help="print every note, not only failures")
    args = p.parse_args(list(argv))
    try:
        profile = load_profile(args.profile)
    except CatalogError as exc:
        # an unknown name lists the known ones; a file that is there but unreadable gets the fix
        fix = "" if not Path(args.profile).is_file() else f"; {PROFILE_FILES}"
        return _refuse(f"{exc}{fix}")
    gpu_name = args.gpu or profile.device.gpu
    try:
        gpu = load_gpu(gpu_name) if gpu_name else None
    except CatalogError as exc:
        where = "--gpu" if args.gpu else f"the profile's device.gpu ({profile.name})"
        return _refuse(f"{where}: {exc}")
    console = Console(width=None if sys.stdout.isatty() else 150)
    render(profile, console, gpu, args.all or len(profile.tables) <= 40, args.notes)
    return 0


def _refuse(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2
