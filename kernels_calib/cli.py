"""Command line: `python -m kernels_calib --out FILE [...]`, `... report FILE`.

`main(argv)` returns the exit status; `mlasim calibrate` wraps it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from kernels_calib.plan import FAMILIES


def _calibrate_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m kernels_calib",
        description="Time MLA absorb/expand, GEMM, MoE, DSA, elementwise and collective kernels "
        "on this device and write a calibration profile. `python -m kernels_calib report PROFILE` "
        "summarises one; `python -m kernels_calib plan [--device cuda] [--quick]` lists what a "
        "run would time.",
    )
    p.add_argument("--out", type=Path, required=True, help="profile JSON to write")
    p.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default=None,
        help="default: cuda when available, else cpu",
    )
    p.add_argument("--quick", action="store_true", help="small grid (CUDA < 1 min)")
    p.add_argument(
        "--ops",
        default=",".join(FAMILIES),
        help=f"comma-separated families from {','.join(FAMILIES)}",
    )
    p.add_argument("--model", default="deepseek-v3", help="catalog model whose shapes to time")
    p.add_argument(
        "--gpu", default=None, help="catalog GPU the device is (default: detected from its name)"
    )
    p.add_argument("--name", default=None, help="profile name (default: the file name)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument(
        "--time-limit-s",
        type=float,
        default=None,
        help="start no point after this many seconds; the profile keeps what was measured",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return p


def _plan(argv: Sequence[str]) -> int:
    """`python -m kernels_calib plan [--device cuda|cpu] [--quick]`: what a run would time."""
    p = argparse.ArgumentParser(
        prog="python -m kernels_calib plan",
        description="Points per kernel family a calibration run would time, and the time its "
        "timing loops may take (input generation, checks and compilation come on top).",
    )
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--quick", action="store_true")
    opts = p.parse_args(list(argv))
    from kernels_calib.plan import make_plan
    from kernels_calib.runner import planned_points
    from sim.catalog import load_model

    counts = planned_points(opts.device, opts.quick)
    timing = make_plan(opts.device, opts.quick, load_model("deepseek-v3").num_heads).timing
    for family, n in counts.items():
        note = " (with 2+ GPUs visible)" if family == "comm" else ""
        print(f"{family:<12} {n:>5} points{note}")
    total = sum(counts.values())
    print(
        f"{'total':<12} {total:>5} points; timing loops stop after {timing.budget_s:g} s per "
        f"point once {timing.min_runs} runs are in: about {total * timing.budget_s:.0f} s of "
        "timing for short kernels, more for kernels slower than the budget"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["report"]:
        from kernels_calib.report import main as report_main

        return report_main(args[1:])
    if args[:1] == ["plan"]:
        return _plan(args[1:])
    parser = _calibrate_parser()
    opts = parser.parse_args(args)
    import torch

    from kernels_calib.runner import calibrate
    from kernels_calib.writer import write_profile

    device = opts.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is visible to torch")
    ops = [o.strip() for o in opts.ops.split(",") if o.strip()]
    if opts.time_limit_s is not None and opts.time_limit_s <= 0:
        parser.error(f"--time-limit-s must be positive, got {opts.time_limit_s}")
    started = time.perf_counter()
    try:
        profile = calibrate(
            device=device,
            quick=opts.quick,
            ops=ops,
            model_name=opts.model,
            gpu_name=opts.gpu,
            name=opts.name or opts.out.stem,
            seed=opts.seed,
            show_progress=not opts.no_progress,
            time_limit_s=opts.time_limit_s,
        )
    except ValueError as exc:
        parser.error(str(exc))
    path = write_profile(profile, opts.out)
    points = sum(len(t.points) for t in profile.tables)
    print(
        f"wrote {path}: {len(profile.tables)} tables, {points} points on {profile.device.name} "
        f"in {time.perf_counter() - started:.1f} s"
    )
    for c in profile.crossover:
        where = f"{c.crossover_new_tokens:.0f} new tokens" if c.crossover_new_tokens else c.status
        print(f"absorb/expand crossover after a {c.prefix_len_tokens}-token prefix: {where}")
    flags = ("FAILED", "not timed", "raised", "stopped", "not run")
    failed = [n for n in profile.notes if any(f in n for f in flags)]
    for note in failed:
        print(f"note: {note}")
    print(f"summary: python -m kernels_calib report {path}")
    return 0
