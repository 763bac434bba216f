"""One calibration run: detect the device, run the chosen kernel families, build the profile."""

from __future__ import annotations

import datetime
import platform
import re
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

import torch
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from kernels_calib import comm, crossover, dsa, elementwise, gemm, mla_decode, mla_prefill, moe
from kernels_calib.context import Ctx, StopCalibration
from kernels_calib.plan import FAMILIES, make_plan
from kernels_calib.resume import ModuleJournal, fingerprint, module_name
from kernels_calib.roofline_factors import derive
from kernels_calib.writer import model_shape, write_profile
from sim.catalog import gpu_names, load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.specs.profile import SCHEMA_VERSION, DeviceInfo, Profile

# --ops name -> modules run for it (the absorb-vs-expand crossover belongs to the extend family)
MODULES: dict[str, tuple[ModuleType, ...]] = {
    "mla_decode": (mla_decode,),
    "mla_prefill": (mla_prefill, crossover),
    "gemm": (gemm,),
    "moe": (moe,),
    "dsa": (dsa,),
    "elementwise": (elementwise,),
    "comm": (comm,),
}
CPU_REFERENCE_GPU = "h200"


def detect_gpu(device_name: str) -> str | None:
    """Catalog GPU named in a driver's device name ('NVIDIA H100 80GB HBM3' -> 'h100')."""
    for name in sorted(gpu_names(), key=len, reverse=True):
        if re.search(rf"\b{re.escape(name)}\b", device_name, flags=re.IGNORECASE):
            return name
    return None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _driver() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None


def device_info(device: str, gpu: str | None) -> DeviceInfo:
    libraries = {"cuda": str(torch.version.cuda)} if device == "cuda" else {}
    if device == "cuda":
        name, driver = torch.cuda.get_device_name(0), _driver()
    else:
        name, driver = f"cpu ({_cpu_name()})", None
    return DeviceInfo(
        name=name, gpu=gpu, driver=driver, torch_version=torch.__version__, libraries=libraries
    )


def planned_points(device: str, quick: bool, model_name: str = "deepseek-v3") -> dict[str, int]:
    """Points each family would time on `device` (collectives: as if 2+ GPUs were visible
    there; here they run only when they are)."""
    model = load_model(model_name)
    ctx = Ctx(
        plan=make_plan(device, quick, model.num_heads),
        model=model,
        gen=torch.Generator(),
        device_name="plan",
    )
    counts = {f: sum(mod.count(ctx) for mod in MODULES[f]) for f in FAMILIES if f != "comm"}
    counts["comm"] = len(comm.OPS) * len(ctx.plan.comm_bytes)
    return counts


def _run_family(ctx: Ctx, mod: ModuleType) -> bool:
    """Run one module; True when it ran to its end (not stopped, not aborted)."""
    if ctx.stop_reason is not None:
        ctx.notes.append(f"{mod.__name__}: not run ({ctx.stop_reason})")
        return False
    try:
        mod.run(ctx)
        return True
    except StopCalibration as stop:
        ctx.notes.append(f"{mod.__name__}: stopped ({stop}); tables measured before it are kept")
    except Exception as exc:  # e.g. out of memory, or an op this torch/GPU lacks: keep the rest
        ctx.notes.append(
            f"{mod.__name__}: aborted at {ctx.current!r} ({exc!r}); tables measured before it "
            "are kept"
        )
        if ctx.device == "cuda":
            torch.cuda.empty_cache()
    return False


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)  # `timeout`, a scheduler, Ctrl-C


def _stop_on_sigterm(ctx: Ctx) -> Callable[[], None]:
    """Ask the run to stop at its next point on SIGTERM or SIGINT (Ctrl-C), so the profile of
    the tables finished is still written; returns what restores the old handlers. A second
    Ctrl-C interrupts at once."""
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}

    def stop(signum: int, frame: object) -> None:
        if ctx.stop_reason is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        ctx.stop_reason = f"stopped by {signal.Signals(signum).name}"

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    try:
        for sig in STOP_SIGNALS:
            signal.signal(sig, stop)
    except ValueError:  # not the main thread: signals cannot be caught here
        return lambda: None
    return restore


def calibrate(
    *,
    device: str,
    quick: bool,
    ops: Sequence[str] = FAMILIES,
    model_name: str = "deepseek-v3",
    gpu_name: str | None = None,
    name: str = "measured",
    seed: int = 0,
    show_progress: bool = True,
    time_limit_s: float | None = None,
    out: Path | None = None,
) -> Profile:
    """Measure the `ops` families on `device` and return the profile.

    With `out`, the profile of the modules finished so far is written there atomically after
    each module, and finished modules are journalled beside it (`kernels_calib.resume`): a run
    killed even by SIGKILL leaves a valid partial profile, and the same call again restores the
    journalled modules and times only the rest. Without `out` nothing is written.

    With `time_limit_s`, no point starts after that many seconds: the families not finished by
    then are noted and the profile keeps every table measured before. SIGTERM (e.g. from
    `timeout`) stops the run the same way at the next point, so a profile is still returned.

    Raises ValueError for an unknown family, a non-MLA model, or a GPU the catalog lacks.
    """
    unknown = sorted(set(ops) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown --ops {unknown}: choose from {', '.join(FAMILIES)}")
    model = load_model(model_name)
    if model.attention != "mla":
        raise ValueError(f"{model_name} has no MLA attention: kernels_calib measures MLA models")
    info = device_info(device, None)
    gpu = gpu_name or (detect_gpu(info.name) if device == "cuda" else CPU_REFERENCE_GPU)
    if gpu is None:
        raise ValueError(
            f"{info.name!r} is not a catalog GPU ({', '.join(gpu_names())}): "
            "pass --gpu with the closest one"
        )
    gen = torch.Generator(device=device).manual_seed(seed)
    ctx = Ctx(
        plan=make_plan(device, quick, model.num_heads),
        model=model,
        gen=gen,
        device_name=info.name,
        gpu=load_gpu(gpu),
        deadline=None if time_limit_s is None else time.perf_counter() + time_limit_s,
    )
    if device == "cpu":
        ctx.notes.append(
            f"CPU run (tiny shapes, one thread, for tests): efficiencies refer to {gpu}'s "
            "datasheet and mean nothing for a GPU"
        )
    modules = [mod for family in ops for mod in MODULES[family]]
    total = sum(mod.count(ctx) for mod in modules)
    columns = (
        TextColumn("{task.description:<48}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    threads = torch.get_num_threads()
    if device == "cpu":  # one thread: intra-op thread pools stall badly on a shared machine
        torch.set_num_threads(1)
    journal = None
    if out is not None:
        run_id = fingerprint(
            device=device, name=info.name, quick=quick, model=model_name, gpu=gpu, seed=seed
        )
        journal = ModuleJournal(out, run_id)
    build = _Assembly(info, gpu, device, quick, model_name, name)
    restore_sigterm = _stop_on_sigterm(ctx)
    spent: dict[str, float] = {}  # wall seconds per module, compiles and tuning included
    try:
        with Progress(*columns, console=Console(stderr=True), disable=not show_progress) as bar:
            task = bar.add_task("calibrating", total=total)
            ctx.progress = lambda label: bar.update(task, advance=1, description=label)
            for i, mod in enumerate(modules):
                started = time.perf_counter()
                if journal is not None and journal.has(mod):
                    journal.restore(ctx, mod)
                    bar.update(task, advance=mod.count(ctx))
                else:
                    mark = ModuleJournal.mark(ctx)
                    if _run_family(ctx, mod) and journal is not None:
                        journal.record(ctx, mod, mark)
                spent[module_name(mod)] = time.perf_counter() - started
                if out is not None and i + 1 < len(modules):
                    missing = [m.__name__ for m in modules[i + 1 :]]
                    write_profile(build.profile(ctx, spent, ops, missing), out)
    finally:
        torch.set_num_threads(threads)
        restore_sigterm()
    profile = build.profile(ctx, spent, ops, [])
    if journal is not None and all(journal.has(mod) for mod in modules):
        journal.remove()  # complete: the profile is the whole result, a rerun measures afresh
    return profile


class _Assembly:
    """Builds the run's profile from its state: at the end, or as a checkpoint mid-run."""

    def __init__(
        self, info: DeviceInfo, gpu: str, device: str, quick: bool, model_name: str, name: str
    ) -> None:
        self.info, self.gpu, self.device, self.quick = info, gpu, device, quick
        self.model_name, self.name = model_name, name

    def profile(
        self, ctx: Ctx, spent: dict[str, float], ops: Sequence[str], missing: Sequence[str]
    ) -> Profile:
        """The profile of what `ctx` holds; `missing` lists modules not yet run (a checkpoint)."""
        notes = list(ctx.notes)
        notes += [f"{family}: not requested (--ops)" for family in FAMILIES if family not in ops]
        notes.append(
            "wall time per module: "
            + ", ".join(f"{mod} {s:.1f} s" for mod, s in spent.items())
            + f" (total {sum(spent.values()):.1f} s)"
        )
        if missing:
            notes.append(
                f"incomplete: {', '.join(missing)} not yet run (the run was still going or was "
                "killed); the same command again resumes it"
            )
        fallback = load_profile(f"{self.gpu}-roofline").roofline
        factors, factor_notes = derive(
            ctx.tables,
            load_gpu(self.gpu),
            f"this {self.device} calibration",
            fallback,
            f"{self.gpu}-roofline",
            measured_launch=ctx.launch,
        )
        info = self.info
        libraries = {**info.libraries, **ctx.libraries}
        return Profile(
            schema_version=SCHEMA_VERSION,
            name=self.name,
            kind="measured",
            description=f"kernels_calib {'quick ' if self.quick else ''}run on {info.name}",
            device=DeviceInfo(**{**info.model_dump(), "gpu": self.gpu, "libraries": libraries}),
            model_shape=model_shape(self.model_name),
            tables=list(ctx.tables),
            roofline=factors,
            crossover=list(ctx.crossover),
            notes=notes + factor_notes,
            created_utc=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        )
