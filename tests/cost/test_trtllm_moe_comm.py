"""TensorRT-LLM's MoE token movement on Hopper and its shared-expert split (`sim.cost.comm_ops`
module docstring, `sim.cost.overheads.shared_expert_tp`): no DeepEP kernel on an H200 node."""

from __future__ import annotations

import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost import comm_ops
from sim.cost.batch import BatchShape
from sim.cost.comm_load import CommLoad
from sim.cost.comm_ops import ROUTING_BYTES_PER_PICK
from sim.cost.ops import AllGather
from sim.cost.overheads import shared_expert_tp
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment
from tests.builders import decode_ranks

V3, H200 = load_model("deepseek-v3"), load_gpu("h200")
TRTLLM = load_profile("h200-trtllm")
EXCHANGE = ("ep_dispatch", "ep_combine")


def decode(counts: list[int], kv: int = 2048) -> BatchShape:
    return decode_ranks(counts, kv)


def dep(engine: str | None, **kw: object) -> Deployment:
    return Deployment(name="d", engine=engine, weight_dtype="fp8", **kw)  # type: ignore[arg-type]


def test_attention_tp_with_ep_all_reduces_the_moe_output_as_tp_experts_do() -> None:
    """TP8 attention, EP8 experts: TensorRT-LLM runs no exchange; its two all-reduces a layer
    are the TP8-experts layout's, the same bytes at the same table price."""
    ep8 = ServingCostModel(V3, H200, dep("trtllm", attn_tp=8, moe_ep=8), TRTLLM)
    tp8 = ServingCostModel(V3, H200, dep("trtllm", attn_tp=8, moe_tp=8), TRTLLM)
    batch = decode([32])
    ep_step, tp_step = ep8.step_cost(batch), tp8.step_cost(batch)
    assert not set(EXCHANGE) & set(ep_step.ops)
    assert ep_step.ops["tp_allreduce"].seconds == pytest.approx(
        tp_step.ops["tp_allreduce"].seconds, rel=1e-12
    )
    assert ep_step.ops["tp_allreduce"].source == "published"
    # SGLang's EP8 under TP attention still runs DeepEP, with one all-reduce a layer
    sglang = ServingCostModel(V3, H200, dep("sglang", attn_tp=8, moe_ep=8)).step_cost(batch)
    assert set(EXCHANGE) <= set(sglang.ops)
    roofline = ServingCostModel(V3, H200, dep(None, attn_tp=8, moe_ep=8)).pricer
    one = comm_ops.tp_allreduce(roofline, V3, dep("sglang", attn_tp=8, moe_ep=8), H200, 32)
    two = comm_ops.tp_allreduce(roofline, V3, dep("trtllm", attn_tp=8, moe_ep=8), H200, 32)
    assert two.seconds == pytest.approx(2 * one.seconds, rel=1e-12)  # the roofline: linear


def test_attention_dp_with_ep_gathers_every_rank_and_scatters_back() -> None:
    """DP8 attention, EP8 experts: one all-gather of every rank's BF16 hidden state with its
    top-k ids and weights and one reduce-scatter of BF16 outputs a MoE layer, each on the
    NCCL all-gather table at its buffer size; no DeepEP kernel."""
    d = dep("trtllm", attn_tp=1, moe_ep=8)
    cm = ServingCostModel(V3, H200, d, TRTLLM)
    step = cm.step_cost(decode([64] * 8))
    assert not set(EXCHANGE) & set(step.ops)
    gather = step.ops["dp_gather"]
    assert gather.source == "published"
    load = CommLoad(rank_tokens=64, sender_tokens=64, unit_tokens=512, decode_only=True)
    h, topk = V3.hidden_size, V3.moe.experts_per_token
    bw = H200.nvlink_gb_s * 1e9
    expected = 0.0
    for row in (2 * h + topk * ROUTING_BYTES_PER_PICK, 2 * h):
        op = AllGather(bytes=512 * row, gpus=8, link="nvlink")
        assert op.work(None, 1.0)[1] == pytest.approx(7 / 8 * 512 * row, rel=1e-12)
        expected += cm.pricer.link(op, bw).seconds
    per_layer = comm_ops.trtllm_moe_comm(cm.pricer, V3, d, H200, load)["dp_gather"].seconds
    assert per_layer == pytest.approx(expected, rel=1e-12)
    assert gather.seconds == pytest.approx(V3.moe_layers * per_layer, rel=0.05)  # bucketed load
    # more tokens on the ranks, more bytes gathered
    bigger = cm.step_cost(decode([256] * 8)).ops["dp_gather"].seconds
    assert bigger > 2 * gather.seconds


def test_shared_experts_split_over_trtllms_attention_tp_group() -> None:
    """TensorRT-LLM: gcd(2048 / 128, tp) GPUs under attention TP whatever the routed split,
    one under attention DP; the other engines split them as the routed experts."""
    assert shared_expert_tp(V3, dep("trtllm", attn_tp=8, moe_ep=8)) == 8
    assert shared_expert_tp(V3, dep("trtllm", attn_tp=8, moe_tp=8)) == 8
    assert shared_expert_tp(V3, dep("trtllm", attn_tp=1, moe_ep=8)) == 1
    assert shared_expert_tp(V3, dep("sglang", attn_tp=8, moe_ep=8)) == 1
    assert shared_expert_tp(V3, dep("sglang", attn_tp=8, moe_tp=8)) == 8
    # the split is what a rank's shared-expert GEMMs read: 1/8 of the weights per GPU
    batch = decode([8])
    split = ServingCostModel(V3, H200, dep("trtllm", attn_tp=8, moe_ep=8), TRTLLM)
    whole = ServingCostModel(V3, H200, dep("sglang", attn_tp=8, moe_ep=8), TRTLLM)
    assert split.ctx.shared_tp == 8 and whole.ctx.shared_tp == 1
    assert (
        split.step_cost(batch).ops["moe_shared"].seconds
        < whole.step_cost(batch).ops["moe_shared"].seconds
    )
