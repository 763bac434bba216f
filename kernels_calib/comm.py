"""Collectives (all-reduce, all-gather, all-to-all) across the GPUs visible on this node.

Needs at least two CUDA GPUs; with fewer the family is skipped and the profile says so. One
process per GPU (NCCL); rank 0 reports per-size latencies. `bytes` is the full tensor: the
all-reduced tensor, the gathered result, the all-to-all input of each rank. The same worker
runs over gloo on CPU, which is how the tests exercise it.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from kernels_calib.context import Ctx, Row
from kernels_calib.timing import TimingConfig, _summary

OPS = ("all_reduce", "all_gather", "all_to_all")
MAX_GPUS = 8


def gpus_visible(ctx: Ctx) -> int:
    return torch.cuda.device_count() if ctx.device == "cuda" else 0


def count(ctx: Ctx) -> int:
    return len(OPS) * len(ctx.plan.comm_bytes) if gpus_visible(ctx) >= 2 else 0


def _collective(op: str, x: torch.Tensor, out: torch.Tensor) -> None:
    if op == "all_reduce":
        dist.all_reduce(x)
    elif op == "all_gather":
        dist.all_gather_into_tensor(out, x[: out.numel() // dist.get_world_size()])
    else:
        dist.all_to_all_single(out, x)


def _worker(
    rank: int,
    world: int,
    backend: str,
    port: int,
    sizes: Sequence[int],
    config: TimingConfig,
    queue: Any,
) -> None:
    dist.init_process_group(
        backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    cuda = backend == "nccl"
    device = torch.device(f"cuda:{rank}") if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    results: dict[str, dict[int, list[float]]] = {op: {} for op in OPS}
    for size in sizes:
        elems = max(world, size // 2 // world * world)  # bf16, divisible by the world size
        x = torch.ones(elems, dtype=torch.bfloat16, device=device) * (rank + 1)
        out = torch.empty_like(x)
        for op in OPS:
            for _ in range(config.warmup):
                _collective(op, x, out)
            samples = []
            for _ in range(config.runs):
                dist.barrier()
                if cuda:
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                _collective(op, x, out)
                if cuda:
                    torch.cuda.synchronize()
                samples.append((time.perf_counter() - t0) * 1e6)
            results[op][size] = samples
    if rank == 0:
        queue.put(results)
    dist.barrier()
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(
    world: int, backend: str, sizes: Sequence[int], config: TimingConfig
) -> dict[str, dict[int, list[float]]]:
    """Latency samples (us) per op and size, from `world` processes over `backend`."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [
        ctx.Process(target=_worker, args=(r, world, backend, port, list(sizes), config, queue))
        for r in range(world)
    ]
    for p in procs:
        p.start()
    try:
        results: dict[str, dict[int, list[float]]] = queue.get(timeout=600)
    finally:
        for p in procs:
            p.join(timeout=60)
    if any(p.exitcode != 0 for p in procs):
        raise RuntimeError(f"collective workers exited with {[p.exitcode for p in procs]}")
    return results


def run(ctx: Ctx) -> None:
    visible = gpus_visible(ctx)
    if visible < 2:
        ctx.notes.append(
            f"comm: {visible} CUDA GPU(s) visible; collectives need at least 2, not measured"
        )
        return
    if ctx.gpu is None:
        ctx.notes.append("comm: GPU not in the catalog, NVLink bandwidth unknown; not measured")
        return
    world = min(MAX_GPUS, visible)
    samples = measure(world, "nccl", ctx.plan.comm_bytes, ctx.plan.timing)
    for op in OPS:
        rows: list[Row] = []
        for size in ctx.plan.comm_bytes:
            ctx.advance(f"{op} gpus={world} bytes={size}")
            rows.append(((float(size),), _summary(samples[op][size], graphed=False)))
        ctx.add(
            op,
            {"gpus": world, "link": "nvlink"},
            ("bytes",),
            rows,
            dtype="bf16",
            impl="nccl",
            link_bytes_per_s=ctx.gpu.nvlink_gb_s * 1e9,
        )
    ctx.libraries["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
