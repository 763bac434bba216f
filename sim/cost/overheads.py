"""Serving-engine overheads outside the kernels' own work, per engine, each with its source.

`Deployment.engine` picks one of `ENGINES`; None (the generic engine) charges none of them, so
scenarios that name no engine price exactly as before. What an engine changes:

- **kernel launch in CUDA graphs.** All three engines replay decode steps from CUDA graphs
  captured up to a batch size (`graph_max_batch`). Inside a graph a small kernel costs what
  one of the engine's own memory-bound kernels measures at its smallest shapes: the replay
  gap plus a few hundred bytes of work. aiconfigurator-core 0.12.0 times, on an H200 inside
  CUDA graphs (its collector's `benchmark_with_power`), each engine's static FP8
  quantisation of an [m, k] BF16 tensor (`quantize/<engine>/<version>/scale_matrix_perf`);
  its median over m <= 16, k <= 2,048 (144 points, under 100 KB moved: the bytes take
  under 0.03 us) is the figure: TensorRT-LLM's one kernel
  (`static_quantize_e4m3_per_tensor`) 1.33 us, vLLM's one kernel (`scaled_fp8_quant`)
  1.89 us, SGLang's collector's four torch kernels (divide, clamp, cast, copy) 7.74 us,
  1.93 us each (no single SGLang kernel is timed there; vLLM's agrees). A trivial 1 x 256
  add costs 1.05 us a kernel in a graph (`h200-measured`'s launch chain), the floor under
  these. The roofline profiles' launch figure, 5.22 us, is instead the smallest time a
  DeepGEMM FP8 GEMM spends beyond its work (its prologue, tail and eager launch); charged to
  every roofline-priced kernel it made each TP8 decode step pay it for ~850 memory-bound
  kernels. With an engine, roofline-priced kernels pay the engine's figure instead (the
  memory-bound kernels of `sim.cost.elementwise` among them). Outside graphs (prefill,
  decode above the captured size) kernels launch eagerly; their CPU launch runs ahead of the
  GPU and hides behind kernels longer than it (every prefill kernel of a DeepSeek-class
  model is), so the same GPU-side time is what a step waits for.
- **shared experts on a second stream.** In a graph-replayed decode step SGLang and
  TensorRT-LLM run a MoE layer's shared experts beside its router and routed experts, on two
  CUDA streams: SGLang's `DeepseekV2MoE.forward` takes `forward_normal_dual_stream` (shared
  experts on the current stream, gate, top-k and experts on `alt_stream`) in capture mode
  without DeepEP, unless the shared expert is fused into the routed kernel as one more expert
  (`python/sglang/srt/models/deepseek_v2.py`); TensorRT-LLM's `Deepseekv3MoE.forward` runs
  `_compute_routed_output` and `_compute_shared_output` through `maybe_execute_in_parallel`
  on its `MoeShared` aux stream (`tensorrt_llm/_torch/models/modeling_deepseekv3.py`). The
  shorter side is hidden (`stream_overlap_s`): the shared expert's GEMMs read a few MB a layer
  at 4-64 tokens, far from what the routed side leaves of HBM bandwidth, so the two share it
  without slowing each other measurably at these sizes (no measurement of the pair running
  together is bundled: that is the assumption). vLLM is not read here: no overlap.
- **the shared experts' split.** TensorRT-LLM splits a MoE layer's shared experts over the
  attention TP group whatever the routed experts' EP x TP, and runs them whole on each rank
  under attention DP (`shared_expert_tp`); the other engines split them as the routed experts.
- **the request path.** A request's TTFT as a client measures it includes the engine's serving
  path outside the forward passes: HTTP, the chat template, tokenisation, the hop to the
  scheduler, detokenisation and streaming. For SGLang it was measured against a mock model:
  SGLang's OpenAI chat endpoint over a CPU mock forward that busy-waits 2.632 ms per forward,
  `vllm bench serve` with 128-token prompts, one user, streaming: median TTFT 9.54 ms, so 6.91
  ms outside the forward (tenstorrent/tt-inference-server#3560, 2026-05). A benchmark workload
  with `request_path: engine` sends each request that long before the engine sees it (not the
  default: docs/serving-overheads.md, (g)). No such measurement was found for vLLM or
  TensorRT-LLM: they are charged none.
- **scheduler CPU time.** Each engine runs its scheduler (batch building, KV allocation, output
  processing) on the CPU while the GPU runs the previous step: SGLang's overlap scheduler
  (default since v0.4), vLLM's async scheduling (default since v0.14.0), TensorRT-LLM's overlap
  scheduler (default). It is therefore not on the step's critical path, and no row charges it.

docs/serving-overheads.md gives the sources and what is left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from sim.cost.rate import OpTime
from sim.specs.deployment import Deployment
from sim.specs.model import ModelSpec

# aiconfigurator-core 0.12.0, systems/data/h200_sxm/quantize/<engine>/<version>/
# scale_matrix_perf.parquet: median latency over m <= 16, k <= 2048 (tests/cost/test_overheads.py
# re-derives each figure from the installed package)
SMALL_KERNEL_TABLE = "aiconfigurator-core 0.12.0 h200_sxm quantize/{}/scale_matrix_perf"
SMALL_KERNEL_US = {
    "trtllm": 1.326,  # 1.3.0rc20: one kernel, tensorrt_llm static_quantize_e4m3_per_tensor
    "vllm": 1.893,  # 0.24.0: one kernel, vllm _custom_ops.scaled_fp8_quant (static scale)
    "sglang": 7.737 / 4,  # 0.5.14: four torch kernels per call (x / scale, clamp, to fp8, copy_)
}
SMALL_KERNEL_SOURCE = {
    "trtllm": "TensorRT-LLM 1.3.0rc20 static_quantize_e4m3_per_tensor on an H200 in a CUDA "
    "graph, median over m <= 16, k <= 2048 (" + SMALL_KERNEL_TABLE.format("trtllm/1.3.0rc20") + ")",
    "vllm": "vLLM 0.24.0 scaled_fp8_quant (static) on an H200 in a CUDA graph, median over "
    "m <= 16, k <= 2048 (" + SMALL_KERNEL_TABLE.format("vllm/0.24.0") + ")",
    "sglang": "SGLang 0.5.14 collector's static FP8 quant, four torch kernels, on an H200 in a "
    "CUDA graph: median 7.737 us over m <= 16, k <= 2048, / 4 kernels ("
    + SMALL_KERNEL_TABLE.format("sglang/0.5.14")
    + "; vLLM's one kernel measures 1.89 us)",
}


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
    graph_launch_us: Figure  # GPU time of one of the engine's smallest kernels in a graph replay
    scheduler_overlapped: Figure  # 1.0: the scheduler's CPU time hides behind the GPU
    shared_experts_stream: Figure  # 1.0: graph decode runs the shared experts on a 2nd stream
    request_path_ms: Figure  # a request's TTFT outside the forward passes (HTTP ... streaming)

    def launch_overhead_s(self) -> float:
        """Fixed cost per roofline-priced kernel in this engine's steps."""
        return self.graph_launch_us.value * 1e-6


def _small_kernel(engine: str) -> Figure:
    return Figure(value=SMALL_KERNEL_US[engine], source=SMALL_KERNEL_SOURCE[engine])


# tenstorrent/tt-inference-server#3560: SGLang's median TTFT over a mock forward, less the forward
SGLANG_MOCK_TTFT_MS, SGLANG_MOCK_FORWARD_MS = 9.54, 2.632
SGLANG_REQUEST_PATH = Figure(
    value=SGLANG_MOCK_TTFT_MS - SGLANG_MOCK_FORWARD_MS,
    source="tenstorrent/tt-inference-server#3560 (2026-05): SGLang's OpenAI chat endpoint over a "
    "CPU mock forward busy-waiting 2.632 ms, vllm bench serve, 128-token prompts, one user, "
    "streaming: median TTFT 9.54 ms (four requests); tokenisation's growth with the prompt is "
    "not in it",
)


def _no_request_path(engine: str) -> Figure:
    return Figure(
        value=0.0,
        source=f"no published measurement of {engine}'s request path outside the forward "
        "passes was found: none charged",
    )


def _sglang(d: Deployment) -> EngineOverheads:
    tp = d.attn_tp * d.attn_dp  # SGLang's tp_size: every GPU of the unit
    return EngineOverheads(
        engine="sglang",
        graph_max_batch=Figure(
            value=512 if tp >= 4 else 256,
            source="sglang python/sglang/srt/server_args.py: cuda_graph_max_bs defaults to 512 "
            "at tp >= 4 (256 below) on GPUs of 80-160 GB (H100, H200)",
        ),
        graph_launch_us=_small_kernel("sglang"),
        request_path_ms=SGLANG_REQUEST_PATH,
        shared_experts_stream=Figure(
            value=1.0 if d.ep == 1 else 0.0,  # DeepEP's path runs them in line
            source="sglang python/sglang/srt/models/deepseek_v2.py: DeepseekV2MoE.forward -> "
            "forward_normal_dual_stream in CUDA-graph capture without DeepEP",
        ),
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
        graph_launch_us=_small_kernel("vllm"),
        request_path_ms=_no_request_path("vLLM"),
        shared_experts_stream=Figure(value=0.0, source="vLLM's DeepSeek code not read here"),
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
        graph_launch_us=_small_kernel("trtllm"),
        request_path_ms=_no_request_path("TensorRT-LLM"),
        shared_experts_stream=Figure(
            value=1.0,
            source="tensorrt_llm/_torch/models/modeling_deepseekv3.py: Deepseekv3MoE.forward "
            "runs routed and shared experts via maybe_execute_in_parallel (MoeShared aux stream)",
        ),
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


# the step-breakdown rows of what concurrency hides (`StepCost.overlap_saved_s`): a deployment
# with two-batch overlap hides under its split alone, one without it under an engine's second
# stream alone (`ServingCostModel.step_cost`)
TWO_BATCH_OVERLAP_ROW, SHARED_EXPERTS_STREAM_ROW = "two_batch_overlap", "shared_experts_stream"
OVERLAP_ROWS = (TWO_BATCH_OVERLAP_ROW, SHARED_EXPERTS_STREAM_ROW)
TWO_BATCH_OVERLAP_SOURCE = (
    "two micro-batches on a compute and a communication stream, as SGLang runs them "
    "(sim.cost.overlap)"
)


def overlap_row(d: Deployment) -> tuple[str, str] | None:
    """(row, source) of what `d`'s steps hide by running work concurrently: two-batch
    overlap's split, or, without it, the engine's shared experts on a second stream; None
    where neither applies."""
    if d.two_batch_overlap:
        return TWO_BATCH_OVERLAP_ROW, TWO_BATCH_OVERLAP_SOURCE
    o = engine_overheads(d)
    if o is not None and o.shared_experts_stream.value:
        return SHARED_EXPERTS_STREAM_ROW, o.shared_experts_stream.source
    return None


# the MoE layer's routed side: router, experts, their kernels and (EP) exchange
ROUTED_SIDE = ("moe_gate", "moe_routed", "moe_elementwise", "ep_dispatch", "ep_combine")


def stream_overlap_s(
    overheads: EngineOverheads | None, ops: Mapping[str, OpTime], graph_decode: bool
) -> float:
    """Seconds of a step hidden by the shared experts running beside the routed side on a
    second stream (module docstring): the shorter of the two, in a graph-replayed decode."""
    if overheads is None or not graph_decode or not overheads.shared_experts_stream.value:
        return 0.0
    shared = ops.get("moe_shared")
    if shared is None:
        return 0.0
    routed = sum(ops[name].seconds for name in ROUTED_SIDE if name in ops)
    return min(shared.seconds, routed)


FP8_SCALE_BLOCK = 128  # DeepSeek-V3's FP8 checkpoints: one weight scale per 128 x 128 block


def shared_expert_tp(model: ModelSpec, d: Deployment) -> int:
    """GPUs a MoE layer's shared experts are split over: the routed experts' TP, except under
    TensorRT-LLM, which splits them over the attention TP group whatever the routed experts'
    EP x TP, as far as whole 128-wide FP8 scale blocks allow (gcd of intermediate / 128 and
    tp_size), and runs them whole on each rank under attention DP
    (`Deepseekv3MoE._compute_shared_expert_tp_size`,
    tensorrt_llm/_torch/models/modeling_deepseekv3.py)."""
    if d.engine != "trtllm":
        return d.moe_tp
    if d.attn_tp == 1:
        return 1
    shared = model.moe.n_shared_experts * model.moe.moe_intermediate_size
    blocks = shared // FP8_SCALE_BLOCK if d.weight_dtype == "fp8" else shared
    return math.gcd(max(blocks, 1), d.attn_tp)
