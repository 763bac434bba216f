"""TensorRT-LLM's measured MoE module in a prefill step (`routed_elementwise.routed_elementwise`):
the table times the engine's whole MoE forward, so no routed kernel is priced beside it."""

from __future__ import annotations

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.batch import BatchShape
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment

V3, H200 = load_model("deepseek-v3"), load_gpu("h200")
TRTLLM, SGLANG = load_profile("h200-trtllm"), load_profile("h200-sglang")


def prefill(tokens: int, ranks: int = 1) -> BatchShape:
    """One `tokens`-token prompt on each of `ranks` attention ranks, whole, from an empty cache."""
    n = np.full(ranks, tokens, dtype=np.int64)
    return BatchShape(
        num_ranks=ranks,
        rank=np.arange(ranks, dtype=np.int64),
        new_tokens=n,
        kv_tokens=n,
        is_decode=np.zeros(ranks, dtype=bool),
    )


@pytest.mark.parametrize(
    ("layout", "ranks"), [(dict(attn_tp=8, moe_ep=8), 1), (dict(attn_tp=1, moe_ep=8), 8)]
)
def test_trtllm_prefill_prices_no_routed_kernel_outside_its_moe_table(
    layout: dict[str, int], ranks: int
) -> None:
    """EP8 under TP8 or DP8 attention, 1K prompts: the routed experts are the table's call alone
    (no DeepEP scatter, gather or dispatch quant), and the step is the sum of its ops."""
    d = Deployment(name="d", engine="trtllm", weight_dtype="fp8", **layout)  # type: ignore[arg-type]
    step = ServingCostModel(V3, H200, d, TRTLLM).step_cost(prefill(1024, ranks))
    assert step.ops["moe_elementwise"].seconds == 0.0
    assert step.ops["moe_routed"].source == "published"
    total = sum(t.seconds for t in step.ops.values()) - step.overlap_saved_s
    assert step.duration_s == pytest.approx(total, rel=1e-9)


def test_sglang_prefill_still_pays_deepeps_token_layout_kernels() -> None:
    """SGLang's EP prefill runs DeepEP's normal kernels and DeepGEMM's contiguous layout: the
    scatter into per-expert rows and the weighted gather back are its own kernels, outside the
    fused-MoE table, and still priced (by their bytes: positive, growing with the prompt)."""
    d = Deployment(name="d", engine="sglang", weight_dtype="fp8", attn_tp=8, moe_ep=8)
    cm = ServingCostModel(V3, H200, d, SGLANG)
    short, long = (cm.step_cost(prefill(n)).ops["moe_elementwise"].seconds for n in (1024, 8192))
    assert 0.0 < short < long


def test_trtllm_gemm_table_holds_its_input_quant_sglangs_does_not_here() -> None:
    """TensorRT-LLM's GEMM table times `Linear.forward` on a BF16 input (the FP8 block-scale
    quant inside): the rank's elementwise drops exactly the projection input quants' time, which
    the same deployment without the engine still pays."""
    from sim.cost import elementwise as ew
    from sim.cost.layer_ops import RankSegments

    d = Deployment(name="d", engine="trtllm", weight_dtype="fp8", attn_tp=8, moe_ep=8)
    cm = ServingCostModel(V3, H200, d, TRTLLM)
    seg = RankSegments(
        q=np.array([1024.0]),
        k=np.array([1024.0]),
        is_decode=np.array([False]),
        path=cm._paths(np.array([1024]), np.array([1024]), np.array([False])),
    )
    kernels = ew.rank_kernels(cm.ctx, seg, "trtllm")
    quants = [k for k in kernels if k.name in ew.GEMM_INPUT_QUANTS]
    assert {k.name for k in quants} >= {"quant_qkv_a_input", "shared_quant_gate_up_input"}
    held = ew.price(cm.pricer, quants).seconds
    full = ew.price(cm.pricer, kernels).seconds
    assert held > 0.0
    assert ew.rank_elementwise(cm.pricer, cm.ctx, seg, "trtllm").seconds == pytest.approx(
        full - held, rel=1e-9
    )
    # the same tables read without TensorRT-LLM's fusions keep every quant kernel
    assert ew.rank_elementwise(cm.pricer, cm.ctx, seg, "sglang").seconds == pytest.approx(
        ew.price(cm.pricer, ew.rank_kernels(cm.ctx, seg, "sglang")).seconds, rel=1e-9
    )


def test_trtllm_mtp_draft_pass_drops_the_same_input_quants() -> None:
    """An MTP draft pass runs the same projections through the same `Linear`: under TensorRT-LLM's
    GEMM table its elementwise leaves out their input quants too; under SGLang it keeps them."""
    from dataclasses import replace

    from sim.cost import elementwise as ew
    from sim.cost.layer_ops import RankSegments

    d = Deployment(name="d", engine="trtllm", weight_dtype="fp8", attn_tp=8, moe_ep=8)
    cm = ServingCostModel(V3, H200, d, TRTLLM)
    assert cm.ctx.engine == "trtllm"
    one = RankSegments(
        q=np.ones(4),
        k=np.full(4, 2048.0),
        is_decode=np.ones(4, dtype=bool),
        path=cm._paths(np.ones(4, dtype=np.int64), np.full(4, 2048), np.ones(4, dtype=bool)),
    )
    kernels = ew.draft_kernels(cm.ctx, one)
    quants = [k for k in kernels if k.name in ew.GEMM_INPUT_QUANTS]
    assert quants
    full = ew.price(cm.pricer, kernels).seconds
    held = ew.price(cm.pricer, quants).seconds
    assert ew.draft_elementwise(cm.pricer, cm.ctx, one).seconds == pytest.approx(
        full - held, rel=1e-9
    )
    sglang_ctx = replace(cm.ctx, engine="sglang")
    assert ew.draft_elementwise(cm.pricer, sglang_ctx, one).seconds == pytest.approx(full, rel=1e-9)
