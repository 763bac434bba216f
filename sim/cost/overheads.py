"""Serving-engine overheads outside the kernels' own work, per engine, each with its source.

`Deployment.engine` picks one of `ENGINES`; None (the generic engine) charges none of them, so
scenarios that name no engine price exactly as before. What an engine changes:

- **kernel launch in CUDA graphs.** All three engines replay decode steps from CUDA graphs
  captured up to a batch size (`graph_max_batch`). Inside a graph a kernel costs the GPU-side
  gap of a graph replay, measured on an H200 at 1.05 us per kernel (`h200-measured`'s launch
  figure: chains of 1 to 33 in-place BF16 adds of 1 x 256, one CUDA graph per chain). The
  roofline profiles' launch figure, 5.22 us, is instead the smallest time a DeepGEMM FP8 GEMM
  spends beyond its work (its prologue, tail and eager launch); charged to every
  roofline-priced kernel it made each TP8 decode step pay it for some 1,600 small kernels.
  With an engine, roofline-priced kernels pay the measured replay gap instead. Outside graphs
  (prefill, decode above the captured size) kernels launch eagerly; their CPU launch runs
  ahead of the GPU and hides behind kernels longer than it (every prefill kernel of a
  DeepSeek-class model is), so the same GPU-side gap is what a step waits for.
- **scheduler CPU time.** Each engine runs its scheduler (batch building, KV allocation, output
  processing) on the CPU while the GPU runs the previous step: SGLang's overlap scheduler
  (default since v0.4), vLLM's async scheduling (default since v0.14.0), TensorRT-LLM's overlap
  scheduler (default). It is therefore not on the step's critical path, and no row charges it.

docs/serving-overheads.md gives the sources and what is left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.specs.deployment import Deployment

GRAPH_REPLAY_LAUNCH_US = 1.05  # h200-measured: (45.63 - 12.02) us / (33 - 1) kernels
GRAPH_REPLAY_SOURCE = (
    "measured on an H200: CUDA-graph replay of chains of 1-33 tiny kernels, (45.63 - 12.02) us "
    "/ 32 kernels (h200-measured's launch figure)"
)


@dataclass(frozen=True, kw_only=True)
class Figure:
    """One overhead figure and where it comes from."""

    value: float
    source: str


@dataclass(frozen=True, kw_only=True)
class EngineOverheads:
    """What one engine adds around the kernels (see the module docstring)."""

    engine: str
    graph_max_batch: Figure  # decode requests per rank replayed from a CUDA graph
    graph_launch_us: Figure  # GPU-side time per kernel of a graph replay
    scheduler_overlapped: Figure  # 1.0: the scheduler's CPU time hides behind the GPU

    def launch_overhead_s(self) -> float:
        """Fixed cost per roofline-priced kernel in this engine's steps."""
        return self.graph_launch_us.value * 1e-6


def _sglang(d: Deployment) -> EngineOverheads:
    tp = d.attn_tp * d.attn_dp  # SGLang's tp_size: every GPU of the unit
    return EngineOverheads(
        engine="sglang",
        graph_max_batch=Figure(
            value=512 if tp >= 4 else 256,
            source="sglang python/sglang/srt/server_args.py: cuda_graph_max_bs defaults to 512 "
            "at tp >= 4 (256 below) on GPUs of 80-160 GB (H100, H200)",
        ),
        graph_launch_us=Figure(value=GRAPH_REPLAY_LAUNCH_US, source=GRAPH_REPLAY_SOURCE),
        scheduler_overlapped=Figure(
            value=1.0,
            source="SGLang's overlap (zero-overhead) batch scheduler, default since v0.4: "
            "https://lmsys.org/blog/2024-12-04-sglang-v0-4/#zero-overhead-batch-scheduler",
        ),
    )


def _vllm(d: Deployment) -> EngineOverheads:
    return EngineOverheads(
        engine="vllm",
        graph_max_batch=Figure(
            value=min(2 * d.max_running_requests, 512),
            source="vllm config: max_cudagraph_capture_size defaults to min(2 x max_num_seqs, 512)",
        ),
        graph_launch_us=Figure(value=GRAPH_REPLAY_LAUNCH_US, source=GRAPH_REPLAY_SOURCE),
        scheduler_overlapped=Figure(
            value=1.0,
            source="vLLM v0.14.0 release notes: async scheduling enabled by default (#27614), "
            "overlapping engine-core scheduling with GPU execution",
        ),
    )


def _trtllm(d: Deployment) -> EngineOverheads:
    return EngineOverheads(
        engine="trtllm",
        graph_max_batch=Figure(
            value=d.max_running_requests,
            source="TensorRT-LLM's PyTorch backend captures CUDA graphs up to the runtime's "
            "max_batch_size when cuda_graph_config is given (assumed: the deployment's "
            "max_running_requests)",
        ),
        graph_launch_us=Figure(value=GRAPH_REPLAY_LAUNCH_US, source=GRAPH_REPLAY_SOURCE),
        scheduler_overlapped=Figure(
            value=1.0,
            source="TensorRT-LLM docs, Overlap Scheduler (enabled by default): "
            "https://nvidia.github.io/TensorRT-LLM/latest/features/overlap-scheduler.html",
        ),
    )


ENGINES = {"sglang": _sglang, "vllm": _vllm, "trtllm": _trtllm}


def engine_overheads(d: Deployment) -> EngineOverheads | None:
    """The overheads of `d.engine` (None: the generic engine, no overheads)."""
    if d.engine is None:
        return None
    if d.engine not in ENGINES:
        raise ValueError(
            f"engine={d.engine!r} has no overheads here; known engines: {', '.join(ENGINES)}"
        )
    return ENGINES[d.engine](d)
