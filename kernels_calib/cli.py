"""Command line: `python -m kernels_calib --out FILE [...]`, `... report FILE`, `... plan`.

`main(argv)` returns the exit status (2: bad input, or torch missing for a command that times
kernels); `mlasim calibrate` wraps it. torch is imported only by the commands that need it, so
`--help` and `report` work from a core install.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from kernels_calib.plan import FAMILIES

# `make calibrate` installs every extra into .venv (torch pinned), then calibrates
INSTALL_TORCH = (
    "pip install 'mlasim[calib]' (or make calibrate: installs all extras into .venv, then "
    "calibrates into profiles/local.json)"
)


def torch_problem(what: str) -> str | None:
    """Why `what` cannot run for want of torch (one line), or None when torch imports."""
    try:
        import torch  # noqa: F401
    except (ImportError, OSError) as exc:  # OSError: installed but a shared library is missing
        if isinstance(exc, ModuleNotFoundError) and exc.name == "torch":
            return f"{what} needs torch: {INSTALL_TORCH}"
        return f"{what} needs torch, which does not import ({exc}); reinstall it: {INSTALL_TORCH}"
    return None


def _refuse(problem: str) -> int:
    print(f"error: {problem}", file=sys.stderr)
    return 2


def _calibrate_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m kernels_calib",
        description="Time MLA absorb/expand, GEMM, MoE, DSA, elementwise and collective kernels "
        "on this device and write a calibration profile. `python -m kernels_calib report PROFILE` "
        "summarises one; `python -m kernels_calib plan [--device cuda] [--quick]` lists what a "
        "run would time. Timing kernels (and plan) needs torch: pip install 'mlasim[calib]'; "
        "report does not.",
    )
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        help="profile JSON to write (rewritten after each kernel module; a killed run resumes "
        "from OUT.journal.jsonl when run again with the same options)",
    )
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
    problem = torch_problem("plan")  # the kernel modules count the points
    if problem:
        return _refuse(problem)
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
    problem = torch_problem("calibration")
    if problem:
        return _refuse(problem)
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
            out=opts.out,
        )
    except ValueError as exc:
        parser.error(str(exc))
    path = write_profile(profile, opts.out)
    points = sum(len(t.points) for t in profile.tables)
    print(
        f"wrote {path}: {len(profile.tables)} tables, {points} points on {profile.device.name} "
        f"in {time.perf_counter() - started:.1f} s"
    )
    from kernels_calib.report import describe_crossover, flagged_notes

    for c in profile.crossover:
        print(f"absorb/expand crossover (new tokens) {describe_crossover(c)}")
    for note in flagged_notes(profile):
        print(f"note: {note}")
    from kernels_calib.resume import journal_path

    if journal_path(path).exists():
        print(
            f"incomplete: finished modules are kept in {journal_path(path)}; run the same "
            "command again to time the rest"
        )
    print(f"summary: python -m kernels_calib report {path}")
    return 0
