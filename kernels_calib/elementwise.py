"""Memory-bound kernels: fused residual-add + RMSNorm over tokens x hidden width.

What SGLang runs twice per layer (`fused_add_rmsnorm`, in place): residual += x, then
x = RMSNorm(residual) * weight, all BF16. Candidates in order of preference: FlashInfer's fused
kernel (CUDA, when importable) and torch (the add in place, then `torch.nn.functional.rms_norm`;
several kernels in eager mode). The first that matches a float64 reference (relative error within
the BF16 bound; NaN or Inf fails) is timed; a failing one is reported and skipped.

Stored as `elementwise` tables over (tokens, width) with width = 2 x hidden: the `elementwise`
op's bytes (one BF16 read + one BF16 write of [tokens, width]) are then exactly the kernel's (x
and residual read, both written), so the cost model prices every norm, RoPE, quant and
activation kernel by its bytes from this one table (`sim.cost.elementwise`).

The family also measures the per-kernel launch cost: chains of LAUNCH_CHAIN tiny in-place adds
(one kernel each on every backend) back to back, one CUDA graph per chain on a GPU as decode
steps replay them; the slope between the two chain lengths is the cost of one more kernel. It
becomes the profile's `launch_overhead_us` (what a roofline-priced kernel pays on top of its
bytes).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from kernels_calib import correctness
from kernels_calib.context import Ctx, Row
from kernels_calib.timing import rotation_sets
from sim.specs.profile import Factor

EPS = 1e-6  # DeepSeek-V3's rms_norm_eps
LAUNCH_CHAIN = (1, 33)  # kernels per timed call; the slope between the two is one kernel's cost
LAUNCH_HIDDEN = 256  # a tiny kernel: one token of this width moves 1 KB
BF16_BOUND = 1e-2

# (x, residual, weight) -> normalised output; the residual is updated in place
AddNorm = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class NormKernel:
    impl: str
    run: AddNorm


def _torch_add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    residual.add_(x)
    return F.rms_norm(residual, (residual.shape[-1],), w, EPS)


def _flashinfer(ctx: Ctx) -> NormKernel | None:
    """FlashInfer's fused kernel (writes the output into x), when the library is importable."""
    try:
        from flashinfer.norm import fused_add_rmsnorm  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        ctx.libraries["flashinfer"] = importlib.metadata.version("flashinfer-python")
    except importlib.metadata.PackageNotFoundError:
        ctx.libraries["flashinfer"] = "unknown"

    def run(x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        fused_add_rmsnorm(x, residual, w, EPS)
        return x

    return NormKernel(impl="flashinfer_fused_add_rmsnorm", run=run)


def candidates(ctx: Ctx) -> list[NormKernel]:
    found = []
    if ctx.device == "cuda":
        fused = _flashinfer(ctx)
        if fused is not None:
            found.append(fused)
    found.append(NormKernel(impl="torch_add_rms_norm", run=_torch_add_rmsnorm))
    return found


def check(ctx: Ctx, kernel: NormKernel, tokens: int = 33, hidden: int = 512) -> bool:
    """The kernel's output and updated residual against float64 (noted either way)."""
    x, residual = ctx.randn(tokens, hidden), ctx.randn(tokens, hidden)
    w = ctx.randn(hidden, std=0.1) + 1.0
    h = x.double() + residual.double()
    want = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * w.double()
    got = kernel.run(x.clone(), residual, w)
    ok = True
    for what, out, ref in (("output", got, want), ("residual", residual, h)):
        result = correctness.compare(
            out.double(), ref, BF16_BOUND, f"elementwise add+rmsnorm {what} [{kernel.impl}]"
        )
        ctx.notes.append(result.message)
        ok = ok and result.ok
    return ok


def checked_kernel(ctx: Ctx) -> NormKernel | None:
    for kernel in candidates(ctx):
        try:
            if check(ctx, kernel):
                return kernel
        except (RuntimeError, TypeError) as exc:
            ctx.notes.append(f"elementwise [{kernel.impl}]: raised {exc!r}; not timed")
    return None


def count(ctx: Ctx) -> int:
    return len(ctx.plan.elementwise_tokens) * len(ctx.plan.elementwise_hidden) + len(LAUNCH_CHAIN)


def _adds(n: int) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    def run(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        for _ in range(n):
            x.add_(y)  # one elementwise kernel per call on every backend
        return x

    return run


def measure_launch(ctx: Ctx) -> None:
    """Per-kernel cost of back-to-back tiny kernels: the slope of chain time over chain length.

    Sets `ctx.launch` (and notes the times); leaves it None when a chain fails its check or
    could not be timed.
    """
    lo, hi = LAUNCH_CHAIN
    x, y = ctx.randn(1, LAUNCH_HIDDEN, dtype=torch.float32), ctx.randn(1, LAUNCH_HIDDEN)
    got = _adds(hi)(x.clone(), y.float())
    check = correctness.compare(
        got.double(), x.double() + hi * y.double(), 1e-5, f"elementwise launch: {hi} adds"
    )
    ctx.notes.append(check.message)
    medians: list[float] = []
    for n in LAUNCH_CHAIN:
        ctx.advance(f"elementwise launch: {n} in-place adds back to back, 1 x {LAUNCH_HIDDEN}")
        if not check.ok:
            continue
        pair = (ctx.randn(1, LAUNCH_HIDDEN), ctx.randn(1, LAUNCH_HIDDEN))
        t = ctx.time_rotating(_adds(n), [pair])
        if t is not None:
            medians.append(t.p50_us)
    if len(medians) != len(LAUNCH_CHAIN):
        ctx.notes.append("elementwise launch: a chain was not timed; launch cost not measured")
        return
    t_lo, t_hi = medians
    per_kernel = max((t_hi - t_lo) / (hi - lo), 0.0)
    graphed = "one CUDA graph per chain" if ctx.device == "cuda" else "eager"
    ctx.launch = Factor(
        value=per_kernel,
        source=f"measured: ({t_hi:.2f} - {t_lo:.2f}) us / ({hi} - {lo}) kernels, chains of "
        f"in-place BF16 adds of 1 x {LAUNCH_HIDDEN} ({graphed}) on {ctx.device_name}",
    )
    ctx.notes.append(f"elementwise launch: {per_kernel:.2f} us per kernel ({ctx.launch.source})")


def run(ctx: Ctx) -> None:
    p = ctx.plan
    kernel = checked_kernel(ctx)
    if kernel is None:
        ctx.notes.append("elementwise: no kernel passed the check; not timed")
    rows: list[Row] = []
    for hidden in p.elementwise_hidden:
        w = ctx.randn(hidden, std=0.1) + 1.0
        for tokens in p.elementwise_tokens:
            ctx.advance(f"elementwise add+rmsnorm tokens={tokens} hidden={hidden}")
            if kernel is None:
                continue
            sets = rotation_sets(2 * 2 * tokens * hidden, ctx.device)
            inputs = [
                (ctx.randn(tokens, hidden), ctx.randn(tokens, hidden), w) for _ in range(sets)
            ]
            rows.append(((float(tokens), float(2 * hidden)), ctx.time_rotating(kernel.run, inputs)))
    if kernel is not None:
        ctx.add("elementwise", {}, ("tokens", "width"), rows, dtype="bf16", impl=kernel.impl)
    measure_launch(ctx)
