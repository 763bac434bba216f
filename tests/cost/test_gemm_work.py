"""GEMM work and pricing: one byte convention with the tables, BF16 heads, launches per call."""

from __future__ import annotations

import pytest
from test_serving import decode_batch as decode

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.calibrated import CalibratedCost
from sim.cost.memory import WEIGHT_BYTES
from sim.cost.ops import AllReduce, Gemm, MoeUp
from sim.cost.pricing import Pricer
from sim.cost.roofline import RooflineCost
from sim.cost.routed import busiest_tokens, experts_touched, routed_gemms
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment
from tests.cost.pricer_spy import Call, spied

V3, H800, H200 = load_model("deepseek-v3"), load_gpu("h800"), load_gpu("h200")
H800_PUB = load_profile("h800-published")


def gemms(calls: list[Call], k: int, n: int) -> list[Call]:
    return [c for c in calls if c[0] == "gemm" and (c[1]["k"], c[1]["n"]) == (k, n)]


def test_deepgemm_table_point_comes_back_inside_a_step() -> None:
    """DeepGEMM's q_b projection (1536 -> 128 x 192) at m = 256 (InferSim's H800 table:
    26.656 us): the FP8 GEMM reads its input in FP8 (the BF16 read is the quant kernel's), as
    the table counts it, so a rank of 256 decode requests prices it at exactly the table's
    latency."""
    cm = ServingCostModel(V3, H800, Deployment(name="dp", nodes=2, attn_tp=1), H800_PUB)
    calls = spied(cm)
    cm.step_cost(decode(16, 256, 4096))
    ((_, attrs, _, nbytes, dtype, t),) = gemms(calls, 1536, 24576)
    assert attrs["m"] == 256 and dtype == "fp8"
    assert nbytes == 1536 * 24576 + 256 * 1536 + 2 * 256 * 24576  # FP8 weights and input, BF16 out
    assert t.source == "published" and not t.extrapolated
    assert t.seconds == pytest.approx(26.656e-6, rel=1e-9)


def test_q_a_and_kv_a_run_as_one_gemm() -> None:
    """SGLang fuses q_a (7168 -> 1536) and kv_a (7168 -> 576) into one GEMM over the same
    input (`fused_qkv_a_proj_with_mqa`): one 7168 -> 2112 GEMM, its weights read once, priced
    at its own n (no table has it: extrapolated from the nearest DeepGEMM key)."""
    cm = ServingCostModel(V3, H800, Deployment(name="dp", nodes=2, attn_tp=1), H800_PUB)
    calls = spied(cm)
    cm.step_cost(decode(16, 256, 4096))
    assert not gemms(calls, 7168, 576) and not gemms(calls, 7168, 1536)
    ((_, _, flops, nbytes, _, t),) = gemms(calls, 7168, 2112)
    assert flops == 2.0 * 256 * 7168 * 2112
    assert nbytes == 7168 * 2112 + 256 * 7168 + 2 * 256 * 2112
    assert t.extrapolated
    # one read of the fused weights costs less than the two GEMMs' tables at the same m
    assert t.seconds < (10.283 + 13.062) * 1e-6


def test_bf16_weights_keep_bf16_inputs() -> None:
    d = Deployment(name="bf16", nodes=4, attn_tp=1, weight_dtype="bf16")
    cm = ServingCostModel(V3, H200, d)
    calls = spied(cm)
    cm.step_cost(decode(32, 8, 4096))
    ((_, _, _, nbytes, dtype, _),) = gemms(calls, 7168, 2112)
    assert dtype == "bf16" and nbytes == 2 * (7168 * 2112 + 8 * 7168 + 8 * 2112)


def test_heads_router_and_eh_proj_run_in_bf16_with_fp8_weights() -> None:
    """SGLang keeps lm_head (and the MTP module's head and eh_proj) and the router GEMM in
    BF16 with DeepSeek's FP8 checkpoints, as memory holds lm_head: BF16 weights at BF16 peak."""
    d = Deployment(name="dp", nodes=2, attn_tp=1, mtp_draft_tokens=1, mtp_acceptance=(0.8,))
    cm = ServingCostModel(V3, H200, d)  # datasheet roofline: time is work over peak
    calls = spied(cm)
    step = cm.step_cost(decode(16, 1, 4096, s_q=2))
    h, vocab = V3.hidden_size, V3.vocab_size
    heads = gemms(calls, h, vocab)
    assert sorted(c[1]["m"] for c in heads) == [1, 2]  # the draft head, then the verify head
    bf16 = [*heads, *gemms(calls, h, V3.moe.n_routed_experts), *gemms(calls, 2 * h, h)]
    assert len(bf16) == 5 and {c[4] for c in bf16} == {"bf16"}
    weights = 2.0 * h * vocab
    assert step.ops["lm_head"].seconds == pytest.approx(
        (weights + 2 * 2 * (h + vocab)) / H200.hbm_bytes_per_s, rel=1e-9
    )
    assert {c[4] for c in gemms(calls, h, 2112)} == {"fp8"}  # the projections stay FP8


def test_launch_is_paid_once_per_call_whatever_the_work_ratio() -> None:
    """A roofline-priced op's reference work (its type's at its shape) can differ from the step's
    actual work (experts not read, a segment of another shape): its launch is not scaled."""
    launch, e_c, e_m = 5e-6, 0.5, 0.8
    pr = Pricer(H200, RooflineCost(H200, e_c, e_m, launch))
    # 32 local experts in the shape, 8 of them read: a quarter of the reference weight bytes
    shape = MoeUp(0.25, 32, 7168, 2048, "masked")
    runs = MoeUp(1.0, 8, 7168, 2048, "masked")
    nbytes = 8 * 7168 * 4096 + 8 * 7168 + 2 * 8 * 4096
    t = pr.price(shape, "fp8", runs=runs)
    assert t.seconds == pytest.approx(nbytes / (H200.hbm_bytes_per_s * e_m) + launch, rel=1e-12)
    # a compute-bound step priced at a memory-bound reference shape keeps its own bound
    big = 2.0 * 4096 * 7168 * 7168
    t = pr.price(Gemm(1, 7168, 7168), "fp8", runs=Gemm(4096, 7168, 7168))
    assert t.seconds == pytest.approx(big / (H200.peak_flops_per_s("fp8") * e_c) + launch)
    # a collective without a table: the profile's link efficiency plus one launch
    rl = load_profile("h200-roofline")
    link_pr = Pricer(H200, CalibratedCost(rl, H200))
    t = link_pr.link(AllReduce(bytes=1e6, gpus=8, link="nvlink"), 400e9)
    r = rl.roofline
    moved = 2 * 7 / 8 * 1e6  # a ring all-reduce: 2 (g - 1) / g of the buffer per GPU
    expected = moved / (400e9 * r.comm_link_efficiency.value) + r.launch_overhead_us.value * 1e-6
    assert t.seconds == pytest.approx(expected, rel=1e-12)
    # two calls of the shape move twice the bytes at its rate (one fixed part, as one link read)
    twice = link_pr.link(AllReduce(bytes=1e6, gpus=8, link="nvlink", calls=2), 400e9)
    launch = r.launch_overhead_us.value * 1e-6
    assert twice.seconds - launch == pytest.approx(2 * (t.seconds - launch), rel=1e-12)


def test_routed_experts_read_the_distinct_experts_their_pairs_land_on() -> None:
    """EP8 (32 experts per GPU), one decode request per rank: the busiest GPU's token-expert
    pairs land on local (1 - (1 - 1/local)^pairs) distinct experts, not one expert each."""
    d = Deployment(name="ep8", nodes=1, attn_tp=1, weight_dtype="fp4")
    cm = ServingCostModel(V3, H200, d)  # datasheet roofline: memory-bound time is bytes / bandwidth
    pairs = busiest_tokens(V3, d, 8.0)
    touched = experts_touched(32, pairs)
    assert touched == pytest.approx(32 * (1 - (31 / 32) ** pairs))
    assert touched < 0.9 * pairs  # pairs collide on experts
    h, i = V3.hidden_size, V3.moe.moe_intermediate_size
    weights = touched * 3 * h * i * WEIGHT_BYTES["fp4"]
    activations = pairs * (h + i) + pairs * 2 * (2 * i + h)  # FP8 inputs, BF16 outputs
    t = routed_gemms(cm.pricer, V3, d, 8.0, decode_only=True).seconds
    assert t == pytest.approx((weights + activations) / H200.hbm_bytes_per_s, rel=1e-9)
    assert experts_touched(32, 0.0) == 0.0 and experts_touched(1, 5.0) == 1.0


def test_kimi_k3_output_gate_is_a_projection_the_size_of_o_proj() -> None:
    """K3's MLA layers gate the heads' outputs: a d -> H d_v GEMM (o_proj's shape transposed)
    and a sigmoid-multiply kernel; a model without the gate prices neither."""
    k3 = load_model("kimi-k3")
    mla, d = k3.mla_spec, k3.hidden_size
    no_gate = k3.model_copy(update={"mla": mla.model_copy(update={"output_gate": False})})
    dep = Deployment(name="dp", nodes=16, attn_tp=1)
    hv = k3.num_heads * mla.v_head_dim
    seen = {}
    for name, model in (("gate", k3), ("none", no_gate)):
        cm = ServingCostModel(model, H200, dep)
        calls = spied(cm)
        step = cm.step_cost(decode(128, 64, 4096))
        seen[name] = (gemms(calls, d, hv), gemms(calls, hv, d), step.ops["attn_proj"].seconds)
    # KDA layers project d -> H d_v too: the gate is the one call more than without it
    assert len(seen["gate"][0]) == len(seen["none"][0]) + 1
    o_flops = {c[2] for c in seen["gate"][1]}
    assert len(o_flops) == 1 and {c[2] for c in seen["gate"][0]} == o_flops  # o_proj's FLOPs
    assert seen["gate"][2] > seen["none"][2]
