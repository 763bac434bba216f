"""Memory-bound kernels of each layer: bytes per kernel, where they apply, how they are priced."""

from __future__ import annotations

import numpy as np
import pytest
from test_serving import decode_batch

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost import elementwise as ew
from sim.cost import rank_work
from sim.cost.calibrated import CalibratedCost
from sim.cost.dispatch import ABSORB, EXPAND
from sim.cost.experts import busiest_gpu_tokens
from sim.cost.layer_ops import RankContext, RankSegments
from sim.cost.pricing import Pricer
from sim.cost.routed_elementwise import routed_kernels
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment
from sim.specs.profile import SCHEMA_VERSION, DeviceInfo, OpPoint, OpTable, Profile
from tests.cost.calibrated_query import table_work

V3, K3, QWEN = load_model("deepseek-v3"), load_model("kimi-k3"), load_model("qwen3-235b-a22b")
H200, H800 = load_gpu("h200"), load_gpu("h800")
H200_RL = load_profile("h200-roofline")


def dp(weight_dtype: str = "fp8", **kw: object) -> Deployment:
    fields: dict[str, object] = {"nodes": 2, "attn_tp": 1, "weight_dtype": weight_dtype, **kw}
    return Deployment(name="dp", **fields)  # type: ignore[arg-type]


def ctx(model: object = V3, **kw: object) -> RankContext:
    return ServingCostModel(model, H200, dp(**kw)).ctx  # type: ignore[arg-type]


def decode(n: int, kv: int = 4096) -> RankSegments:
    return RankSegments(
        q=np.ones(n), k=np.full(n, float(kv)), is_decode=np.ones(n, bool), path=np.full(n, ABSORB)
    )


def by_name(kernels: list[ew.Kernel]) -> dict[str, ew.Kernel]:
    out: dict[str, ew.Kernel] = {}
    for k in kernels:
        out.setdefault(k.name, k)
    return out


def test_deepseek_v3_kernel_bytes_per_token() -> None:
    """Hand counts for DeepSeek-V3 (d 7168, q_lora 1536, d_c 512, d_s 64, 128 heads, FP8)."""
    k = by_name(ew.rank_kernels(ctx(), decode(4)))
    want = {
        "residual_add_norm": (4 * 2 * 7168, 2 * 61),  # x and residual read and written
        "quant_qkv_a_input": (7168 * (2 + 1 + 4 / 128), 61),  # one quant: shared input
        "q_a_norm": (2 * 2 * 1536, 61),
        "quant_q_b_input": (1536 * (2 + 1 + 4 / 128), 61),
        "kv_a_norm": (2 * 2 * 512, 61),
        "rope": (2 * 2 * (128 + 1) * 64 + 2 * 64, 61),  # q_pe of 128 heads + k_pe, cos/sin
        "kv_store": (2 * 576 + 2 * 576, 61),  # BF16 latent in, BF16 cache out
        "quant_o_proj_input": (128 * 128 * (2 + 1 + 4 / 128), 61),
        "router": (4 * 256 + 8 * 8, 58),  # fp32 logits in; weights + ids out
        "shared_quant_gate_up_input": (7168 * (2 + 1 + 4 / 128), 58),
        "shared_silu_mul": (2 * 3 * 2048, 58),
        "shared_quant_down_input": (2048 * (2 + 1 + 4 / 128), 58),
        "dense_quant_gate_up_input": (7168 * (2 + 1 + 4 / 128), 3),
        "dense_silu_mul": (2 * 3 * 18432, 3),
        "dense_quant_down_input": (18432 * (2 + 1 + 4 / 128), 3),
        "final_norm": (4 * 2 * 7168, 1),
    }
    assert set(k) == set(want)
    for name, (nbytes, layers) in want.items():
        assert k[name].bytes_per_token == pytest.approx(nbytes), name
        assert k[name].layers == layers and k[name].tokens == 4, name
    # the elementwise op's width convention: one BF16 read + one BF16 write of [tokens, width]
    assert k["residual_add_norm"].width == 2 * 7168
    assert k["quant_qkv_a_input"].width == pytest.approx(0.7578125 * 7168)
    for kernel in k.values():
        _, nbytes = table_work("elementwise", {"tokens": kernel.tokens, "width": kernel.width})
        assert nbytes == pytest.approx(kernel.tokens * kernel.bytes_per_token)


def test_fp8_quant_only_with_fp8_activations() -> None:
    bf16 = {k.name for k in ew.rank_kernels(ctx(weight_dtype="bf16"), decode(4))}
    fp8 = {k.name for k in ew.rank_kernels(ctx(weight_dtype="fp8"), decode(4))}
    assert not any("quant" in n for n in bf16)
    assert {n for n in fp8 if "quant" in n} == {
        "quant_qkv_a_input",
        "quant_q_b_input",
        "quant_o_proj_input",
        "shared_quant_gate_up_input",
        "shared_quant_down_input",
        "dense_quant_gate_up_input",
        "dense_quant_down_input",
    }
    assert fp8 - bf16 == {n for n in fp8 if "quant" in n}


def test_router_only_on_moe_layers() -> None:
    router = by_name(ew.rank_kernels(ctx(), decode(4)))["router"]
    assert router.layers == V3.moe_layers == 58
    dense_only = V3.model_copy(update={"moe": V3.moe.model_copy(update={"first_dense_layers": 61})})
    c = RankContext(**{**vars(ctx()), "model": dense_only})
    kernels = by_name(ew.rank_kernels(c, decode(4)))
    assert not {"router", "shared_silu_mul", "shared_quant_down_input"} & set(kernels)
    assert kernels["dense_silu_mul"].layers == 61
    pr = Pricer(H200, CalibratedCost(H200_RL, H200))
    assert ew.price(pr, [ew.Kernel(name="r", tokens=4, bytes_per_token=1.0, layers=0)]).seconds == 0


def test_expand_path_quantises_every_expanded_cached_token() -> None:
    s = RankSegments(
        q=np.array([1.0, 512.0]),
        k=np.array([4096.0, 8192.0]),
        is_decode=np.array([True, False]),
        path=np.array([ABSORB, EXPAND], dtype=np.int8),
    )
    k = by_name(ew.rank_kernels(ctx(), s))
    assert k["quant_kv_b_input"].tokens == 8192 and k["kv_a_norm"].tokens == 513
    assert k["quant_kv_b_input"].bytes_per_token == pytest.approx(512 * (3 + 4 / 128))
    assert "quant_kv_b_input" not in by_name(ew.rank_kernels(ctx(), decode(4)))


def test_gqa_and_unrotated_models_run_only_the_kernels_they_have() -> None:
    q = by_name(ew.rank_kernels(ctx(QWEN), decode(2)))
    g = QWEN.gqa_spec
    assert not {"q_a_norm", "kv_a_norm"} & set(q)
    heads, kvh = QWEN.num_heads, g.num_kv_heads
    assert q["rope"].bytes_per_token == 2 * 2 * (heads + kvh) * g.head_dim + 2 * g.head_dim
    assert q["kv_store"].bytes_per_token == 2 * 2 * (2 * kvh * g.head_dim)
    k3 = by_name(ew.rank_kernels(ctx(K3, nodes=16), decode(2)))
    assert "rope" not in k3 and "kv_a_norm" in k3  # K3's d_s dims carry no rotation
    assert k3["kv_a_norm"].layers == K3.attention_layers < K3.num_layers
    assert k3["residual_add_norm"].layers == 2 * K3.num_layers


def test_routed_activation_on_the_busiest_gpu() -> None:
    d = dp()
    busiest = busiest_gpu_tokens(
        1024 * 8, 256, d.ep, d.expert_zipf_exponent, d.eplb_redundant_experts, 8
    )
    fused = routed_kernels(V3, d, 1024, decode_only=True)
    assert [k.name for k in fused] == ["routed_silu_mul_quant"]
    assert fused[0].tokens == pytest.approx(busiest)
    assert fused[0].bytes_per_token == pytest.approx(2 * 2 * 2048 + 2048 * (1 + 4 / 128))
    bf16 = routed_kernels(V3, dp(weight_dtype="bf16"), 1024, decode_only=True)
    assert [(k.name, k.bytes_per_token) for k in bf16] == [("routed_silu_mul", 6 * 2048)]


def test_prefill_steps_add_deepep_normal_mode_kernels() -> None:
    """Contiguous layout: quant before the dispatch (the rank's tokens), scatter into per-expert
    rows and weighted gather back (the busiest GPU's token-expert pairs)."""
    d = dp()
    busiest = busiest_gpu_tokens(
        1024 * 8, 256, d.ep, d.expert_zipf_exponent, d.eplb_redundant_experts, 8
    )
    split = {k.name: k for k in routed_kernels(V3, d, 1024, False, sender_tokens=64)}
    assert list(split) == [
        "routed_silu_mul", "routed_quant_down_input", "quant_dispatch_input", "ep_scatter",
        "ep_gather",
    ]  # fmt: skip
    assert split["quant_dispatch_input"].tokens == 64
    assert split["quant_dispatch_input"].bytes_per_token == pytest.approx((2 + 1 + 4 / 128) * 7168)
    assert split["ep_scatter"].tokens == pytest.approx(busiest)
    assert split["ep_scatter"].bytes_per_token == pytest.approx(2 * (1 + 4 / 128) * 7168)
    assert split["ep_gather"].bytes_per_token == 4 * 7168
    one_gpu = routed_kernels(V3, dp(nodes=1, moe_ep=1, moe_tp=8), 1024, False, sender_tokens=64)
    assert [k.name for k in one_gpu] == ["routed_silu_mul", "routed_quant_down_input"]


def test_step_breakdown_has_elementwise_at_the_roofline_it_states() -> None:
    cm = ServingCostModel(V3, H200, dp(), H200_RL)
    step = cm.step_cost(decode_batch(16, 64, 2048))
    rank, unit = step.ops["elementwise"], step.ops["moe_elementwise"]
    assert rank.source == "roofline" and unit.source == "roofline"
    r = H200_RL.roofline
    bw = H200.hbm_bytes_per_s * r.memory_bandwidth_efficiency.value
    launch = r.launch_overhead_us.value * 1e-6
    kernels = ew.rank_kernels(cm.ctx, decode(64, 2048))
    want = sum(k.layers * (k.tokens * k.bytes_per_token / bw + launch) for k in kernels)
    assert rank.seconds == pytest.approx(want, rel=1e-6)
    assert launch * sum(k.layers for k in kernels) > 0.5 * want  # small decode: launch-bound
    assert step.duration_s == pytest.approx(sum(t.seconds for t in step.ops.values()))


def test_published_ops_keep_their_source_beside_roofline_elementwise() -> None:
    step = ServingCostModel(V3, H800, dp(), load_profile("h800-published")).step_cost(
        decode_batch(16, 64, 2048)
    )
    assert step.ops["moe_routed"].source == "published"
    assert step.ops["elementwise"].source == "roofline"  # no elementwise table: said so


def measured_profile(latency_us: float) -> Profile:
    points = []
    for tokens in (64.0, 1024.0):
        for width in (512.0, 14336.0):
            _, nbytes = table_work("elementwise", {"tokens": tokens, "width": width})
            scale = (tokens * width) / (1024 * 14336)
            points.append(
                OpPoint(
                    at={"tokens": tokens, "width": width},
                    latency_us_p50=latency_us * max(scale, 0.05),
                    flops=0.0,
                    hbm_bytes=nbytes,
                )
            )
    table = OpTable(
        op="elementwise",
        key={},
        axes={"tokens": [64.0, 1024.0], "width": [512.0, 14336.0]},
        points=points,
        dtype="bf16",
        impl="test",
        source="test table",
    )
    return Profile(
        schema_version=SCHEMA_VERSION,
        name="ew-test",
        kind="measured",
        device=DeviceInfo(name="test", gpu="h200"),
        tables=[table],
        roofline=H200_RL.roofline,
    )


def test_calibrated_path_reproduces_a_table_point() -> None:
    profile = measured_profile(40.0)
    pr = Pricer(H200, CalibratedCost(profile, H200))
    norm = ew.Kernel(name="residual_add_norm", tokens=1024, bytes_per_token=4 * 2 * 7168)
    t = ew.price(pr, [norm])
    assert t.source == "measured" and not t.extrapolated
    assert t.seconds == pytest.approx(40e-6, rel=1e-9)
    quant = ew.Kernel(name="q", tokens=512, bytes_per_token=ew.quant_bytes(1536))
    inside = ew.price(pr, [quant])
    assert inside.source == "measured" and not inside.extrapolated
    far = ew.price(pr, [ew.Kernel(name="n", tokens=1 << 16, bytes_per_token=4 * 2 * 7168)])
    assert far.extrapolated


def test_mtp_draft_counts_its_layer_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    d = dp(mtp_draft_tokens=1, mtp_acceptance=(0.8,))
    cm = ServingCostModel(V3, H200, d, H200_RL)
    s = decode(64, 2048)
    s = RankSegments(q=np.full(64, 2.0), k=s.k, is_decode=s.is_decode, path=s.path)
    with_ew = cm._rank_ops(s)["mtp_draft"].seconds
    draft = by_name(ew.draft_kernels(cm.ctx, decode(64, 2048)))
    assert draft["mtp_input_norms"].layers == 2 and draft["router"].layers == 1
    assert "dense_silu_mul" not in draft
    # one draft: the draft extend runs the module over accepted + 1 tokens, padded to 2
    extend = rank_work.draft_segments(s, 2)
    alone = ew.draft_elementwise(cm.pricer, cm.ctx, extend).seconds
    monkeypatch.setattr(rank_work, "draft_elementwise", lambda *a: ew.price(cm.pricer, []))
    cm2 = ServingCostModel(V3, H200, d, H200_RL)
    assert with_ew - cm2._rank_ops(s)["mtp_draft"].seconds == pytest.approx(alone, rel=1e-9)


def test_kimi_k3_output_gate_kernel_reads_gate_and_output() -> None:
    k3 = by_name(ew.rank_kernels(ctx(K3, nodes=16), decode(2)))
    hv = K3.num_heads * K3.mla_spec.v_head_dim  # heads on the GPU: attention TP 1
    assert k3["output_gate"].bytes_per_token == 3 * 2 * hv
    assert k3["output_gate"].layers == K3.attention_layers
    assert "output_gate" not in by_name(ew.rank_kernels(ctx(), decode(2)))  # V3 has no gate


def test_kernels_kept_by_the_pricer_price_as_a_fresh_pricer_does() -> None:
    """`price` keeps each kernel's scaled time in its pricer (`Pricer.pieces`): kernels met
    again, alone or among others, price bit for bit as on a pricer that never saw them."""
    d = dp()
    seen, fresh = ServingCostModel(V3, H200, d).pricer, ServingCostModel(V3, H200, d).pricer
    lists = [routed_kernels(V3, d, n, decode_only, sender)
             for n, decode_only, sender in ((4096, False, 512), (4096, False, 640),
                                            (8192, True, 0), (4096, False, 512))]  # fmt: skip
    first = [ew.price(seen, ks) for ks in lists]
    assert len(seen.pieces) == len({k for ks in lists for k in ks})  # one entry per kernel
    again = [ew.price(seen, ks) for ks in reversed(lists)][::-1]
    assert first == again == [ew.price(fresh, ks) for ks in lists]
    assert first[0] != first[1]  # the sender's kernel tells the two apart
