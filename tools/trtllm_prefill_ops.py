"""One TensorRT-LLM prefill step on 8 x H200, op by op: the simulator beside aiconfigurator-core.

    PYTHONPATH=. python tools/trtllm_prefill_ops.py [--isl 1024 8192]

For DeepSeek-R1 FP8 (FP8 KV, BF16 context attention) on the `h200-trtllm` profile and three
layouts (attention TP8 with MoE EP8 or MoE TP8; attention DP8 with MoE EP8) it prices one
prompt per attention rank, whole, from an empty cache, and prints each op group's time beside
the same group in aiconfigurator-core's own estimate of the context phase (its
`EngineHandle.run_static_per_op` at batch 1 per rank over the same silicon tables). That
estimate is a kernel-level model over the same data, not a measurement: the table shows where
the two op lists, shapes or counts differ, never a number to fit. Needs the `validate` extra
(aiconfigurator-core installed).
"""

from __future__ import annotations

import argparse

import numpy as np

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.batch import BatchShape
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment

LAYOUTS = {
    "attn TP8, MoE EP8": (dict(attn_tp=8, moe_ep=8), dict(tp_size=8, moe_ep_size=8)),
    "attn TP8, MoE TP8": (dict(attn_tp=8, moe_tp=8), dict(tp_size=8, moe_tp_size=8)),
    "attn DP8, MoE EP8": (dict(attn_tp=1, moe_ep=8), dict(attention_dp_size=8, moe_ep_size=8)),
}
# op group -> (the simulator's step ops, aiconfigurator's context ops)
GROUPS = {
    "attention (proj + core)": (
        ("attn_proj", "attn_prefill", "mla_bmm"),
        ("context_mla_block",),
    ),
    "routed experts": (("moe_routed", "moe_elementwise"), ("context_moe",)),
    "MoE token movement": (
        ("tp_allreduce", "dp_gather", "ep_dispatch", "ep_combine"),
        ("context_moe_pre_dispatch", "context_moe_post_dispatch"),
    ),
    "shared experts": (
        ("moe_shared",),
        ("context_shared_gate_up_gemm", "context_shared_ffn2_gemm", "context_shared_act_gate"),
    ),
    "router": (("moe_gate",), ("context_router_gemm",)),
    "dense MLP (3 layers)": (("dense_mlp",), ()),
    "memory-bound kernels": (("elementwise",), ("context_add_norm_1", "context_add_norm_2")),
    "lm_head, embedding": (("lm_head",), ("context_logits_gemm", "context_embedding")),
}


def simulated_ms(layout: dict[str, int], isl: int) -> tuple[float, dict[str, float]]:
    """The simulator's step (ms) and its ops (ms): one `isl`-token prompt per attention rank."""
    d = Deployment(name="d", engine="trtllm", weight_dtype="fp8", kv_dtype="fp8", **layout)  # type: ignore[arg-type]
    cm = ServingCostModel(
        load_model("deepseek-v3"), load_gpu("h200"), d, load_profile("h200-trtllm")
    )
    ranks = d.attn_dp
    n = np.full(ranks, isl, dtype=np.int64)
    step = cm.step_cost(
        BatchShape(
            num_ranks=ranks,
            rank=np.arange(ranks, dtype=np.int64),
            new_tokens=n,
            kv_tokens=n,
            is_decode=np.zeros(ranks, dtype=bool),
        )
    )
    return step.duration_s * 1e3, {k: t.seconds * 1e3 for k, t in step.ops.items()}


def aiconfigurator_ms(parallel: dict[str, int], isl: int) -> tuple[float, dict[str, float]]:
    """aiconfigurator-core's context phase (ms) and its ops (ms), batch 1 per attention rank."""
    from aiconfigurator_core.sdk.engine import EngineHandle

    h = EngineHandle.compile(
        "deepseek-ai/DeepSeek-R1",
        "h200_sxm",
        "trtllm",
        kvcache_quant_mode="fp8",
        fmha_quant_mode="bfloat16",  # its H200 TensorRT-LLM tables hold no FP8 context MLA
        **parallel,
    )
    context, _ = h.run_static_per_op(batch_size=1, isl=isl, osl=2)
    ops = {name: ms for name, ms, *_ in context}
    return sum(ops.values()), ops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--isl", type=int, nargs="+", default=[1024, 8192])
    args = ap.parse_args()
    for name, (ours, theirs) in LAYOUTS.items():
        for isl in args.isl:
            sim_step, sim_ops = simulated_ms(ours, isl)
            aic_step, aic_ops = aiconfigurator_ms(theirs, isl)
            print(f"\n{name}, {isl:,}-token prompt per rank: step {sim_step:.2f} ms, ", end="")
            print(f"aiconfigurator-core {aic_step:.2f} ms")
            print(f"  {'op group':26s} {'mlasim':>9s} {'aic':>9s}")
            for group, (mine, its) in GROUPS.items():
                a = sum(sim_ops.get(k, 0.0) for k in mine)
                b = sum(aic_ops.get(k, 0.0) for k in its)
                print(f"  {group:26s} {a:9.2f} {b:9.2f}")


if __name__ == "__main__":
    main()
