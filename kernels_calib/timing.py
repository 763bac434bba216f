"""Timing discipline: warm-up, device-side timing, spread of many runs, rotating inputs.

`fn(i)` runs the kernel once on input set `i % sets` (the caller rotates buffers so repeats read
from HBM, not from L2). On CUDA each run is bracketed by CUDA events, optionally replaying a
captured CUDA graph per input set (cuts Python launch cost out of multi-kernel fallbacks); on
CPU, by perf_counter. Runs stop at `runs` or once `budget_s` is spent (after `min_runs`; on
CUDA the count is set from one synchronised warm run, since launches return before the work).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # torch only where kernels are timed: plan.py and --help import this without it
    import torch

L2_BYTES = 64 << 20  # at least Hopper's L2 (50-60 MB): rotated sets together exceed it


@dataclass(frozen=True)
class Timing:
    p10_us: float
    p50_us: float
    p90_us: float
    runs: int
    graphed: bool


@dataclass(frozen=True)
class TimingConfig:
    warmup: int = 3
    runs: int = 30
    min_runs: int = 5
    budget_s: float = 0.3
    cuda_graphs: bool = True


def rotation_sets(bytes_per_set: float, device: str, max_sets: int = 8) -> int:
    """Input sets to rotate through so one pass touches more than L2 (1 on CPU: caches are tiny
    next to the shapes timed there, and memory is shared)."""
    if device != "cuda" or bytes_per_set <= 0:
        return 1
    return int(min(max_sets, max(1, math.ceil(2 * L2_BYTES / bytes_per_set))))


def _summary(samples_us: list[float], graphed: bool) -> Timing:
    p10, p50, p90 = np.percentile(np.asarray(samples_us), [10, 50, 90])
    return Timing(float(p10), float(p50), float(p90), len(samples_us), graphed)


def time_kernel(
    fn: Callable[[int], object], *, sets: int, device: str, config: TimingConfig
) -> Timing:
    """Median and spread of `fn`'s latency in microseconds."""
    if device == "cuda":
        return _time_cuda(fn, sets, config)
    for i in range(config.warmup):
        fn(i % sets)
    samples: list[float] = []
    start_all = time.perf_counter()
    while len(samples) < config.runs:
        t0 = time.perf_counter()
        fn(len(samples) % sets)
        samples.append((time.perf_counter() - t0) * 1e6)
        if len(samples) >= config.min_runs and time.perf_counter() - start_all > config.budget_s:
            break
    return _summary(samples, graphed=False)


def _capture(fn: Callable[[int], object], sets: int) -> list[torch.cuda.CUDAGraph] | None:
    """One CUDA graph per input set, or None when the kernel cannot be captured."""
    import torch

    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for i in range(sets):
                fn(i)
        torch.cuda.current_stream().wait_stream(stream)
        graphs: list[torch.cuda.CUDAGraph] = []
        for i in range(sets):
            g = torch.cuda.CUDAGraph()
            pool = graphs[0].pool() if graphs else None  # replayed one at a time: share memory
            with torch.cuda.graph(g, pool=pool):
                fn(i)
            graphs.append(g)
        return graphs
    except (RuntimeError, torch.cuda.CudaError):  # uncapturable op (host sync, CPU fallback)
        torch.cuda.synchronize()
        return None


def _time_cuda(fn: Callable[[int], object], sets: int, config: TimingConfig) -> Timing:
    import torch

    graphs = _capture(fn, sets) if config.cuda_graphs else None

    def run(i: int) -> None:
        if graphs is not None:
            graphs[i % sets].replay()
        else:
            fn(i % sets)

    for i in range(config.warmup):
        run(i)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    run(0)
    torch.cuda.synchronize()
    one_s = time.perf_counter() - t0
    runs = max(config.min_runs, min(config.runs, int(config.budget_s / max(one_s, 1e-9))))
    pairs = []
    for i in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run(i)
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    samples = [s.elapsed_time(e) * 1e3 for s, e in pairs]
    return _summary(samples, graphed=graphs is not None)
