"""Memory-bound kernels under an engine: the per-kernel figure each engine's own measured kernel
gives, and the fusions its DeepSeek code makes (`sim.cost.overheads`, `sim.cost.elementwise`)."""

from __future__ import annotations

import importlib.util
from importlib import resources

import numpy as np
import pytest
from test_serving import decode_batch

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost import elementwise as ew
from sim.cost.batch import BatchShape, StepCost
from sim.cost.dispatch import ABSORB
from sim.cost.layer_ops import RankSegments
from sim.cost.overheads import ROUTED_SIDE, SMALL_KERNEL_US, engine_overheads
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment

V3, H200 = load_model("deepseek-v3"), load_gpu("h200")
TABLE_VERSIONS = {"sglang": "0.5.14", "trtllm": "1.3.0rc20", "vllm": "0.24.0"}
KERNELS_PER_CALL = {"sglang": 4, "trtllm": 1, "vllm": 1}  # their collectors' timed calls


def tp8(engine: str | None, **kw: object) -> Deployment:
    fields: dict[str, object] = {"nodes": 1, "attn_tp": 8, "moe_tp": 8, "engine": engine, **kw}
    return Deployment(name="tp8", **fields)  # type: ignore[arg-type]


def segments(n: int, decode: bool = True, q: float = 1.0) -> RankSegments:
    return RankSegments(
        q=np.full(n, q),
        k=np.full(n, 2048.0),
        is_decode=np.full(n, decode),
        path=np.full(n, ABSORB),
    )


@pytest.mark.skipif(
    importlib.util.find_spec("aiconfigurator_core") is None,
    reason="aiconfigurator-core not installed (pip install 'mlasim[validate]')",
)
@pytest.mark.parametrize("engine", sorted(TABLE_VERSIONS))
def test_small_kernel_figure_is_the_engines_measured_quant_kernel(engine: str) -> None:
    import pandas as pd

    root = resources.files("aiconfigurator_core") / "systems" / "data" / "h200_sxm" / "quantize"
    path = root / engine / TABLE_VERSIONS[engine] / "scale_matrix_perf.parquet"
    with resources.as_file(path) as f:
        table = pd.read_parquet(f)
    small = table[(table.m <= 16) & (table.k <= 2048)]
    assert len(small) == 144
    assert (3 * small.m * small.k).max() / H200.hbm_bytes_per_s < 0.03e-6  # bytes: negligible
    per_kernel_us = float(small.latency.median()) * 1e3 / KERNELS_PER_CALL[engine]
    assert SMALL_KERNEL_US[engine] == pytest.approx(per_kernel_us, abs=5e-4)


@pytest.mark.parametrize("engine", ["sglang", "trtllm", "vllm"])
def test_unmeasured_kernels_pay_the_engines_figure_not_the_profiles(engine: str) -> None:
    profile = load_profile(f"h200-{engine}")
    assert not any(t.op == "elementwise" for t in profile.tables)
    cm = ServingCostModel(V3, H200, tp8(engine), profile)
    s = segments(4)
    kernels = ew.rank_kernels(cm.ctx, s, engine)
    if ew.quant_in_gemm_table(cm.pricer, engine):  # TensorRT-LLM's GEMM table holds them
        kernels = [k for k in kernels if k.name not in ew.GEMM_INPUT_QUANTS]
    bw = H200.hbm_bytes_per_s * profile.roofline.memory_bandwidth_efficiency.value
    over = engine_overheads(cm.deployment)
    assert over is not None
    launch = over.launch_overhead_s()
    assert launch == pytest.approx(SMALL_KERNEL_US[engine] * 1e-6)
    want = sum(
        k.layers * (k.tokens * k.bytes_per_token / bw + (launch if k.launched else 0.0))
        for k in kernels
    )
    got = ew.rank_elementwise(cm.pricer, cm.ctx, s, engine)
    assert got.source == "roofline"
    assert got.seconds == pytest.approx(want, rel=1e-9)
    # the profile's own launch figure (a DeepGEMM residual) is what the generic engine pays
    generic = ServingCostModel(V3, H200, tp8(None), profile)
    plain = ew.rank_elementwise(generic.pricer, generic.ctx, s)
    r = profile.roofline.launch_overhead_us.value * 1e-6
    base = ew.rank_kernels(generic.ctx, s)
    assert plain.seconds == pytest.approx(
        sum(k.layers * (k.tokens * k.bytes_per_token / bw + r) for k in base), rel=1e-9
    )
    assert got.seconds < 0.5 * plain.seconds  # 4 tokens: launch-bound


def launches(kernels: list[ew.Kernel], name: str) -> tuple[int, int]:
    """(launched, fused) runs of the kernels called `name`-something."""
    own = [k for k in kernels if k.name.startswith(name)]
    return sum(k.layers for k in own if k.launched), sum(k.layers for k in own if not k.launched)


def test_trtllm_attention_tp_fuses_residual_norms_into_the_allreduce() -> None:
    cm = ServingCostModel(V3, H200, tp8("trtllm"), load_profile("h200-trtllm"))
    every = 2 * V3.num_layers
    fused = ew.rank_kernels(cm.ctx, segments(4), "trtllm")
    dense = V3.moe.first_dense_layers
    # left: layer 0's input norm and each dense layer's post-attention norm (pre-MLP fusion
    # is NVFP4-only); the final norm is done by the last MoE layer's all-reduce
    assert launches(fused, "residual_add_norm") == (1 + dense, every - 1 - dense)
    assert launches(fused, "final_norm") == (0, 1)
    plain = ew.rank_kernels(cm.ctx, segments(4), "sglang")
    assert launches(plain, "residual_add_norm") == (every, 0)

    # the fused norms' bytes are still paid
    def total_bytes(ks: list[ew.Kernel]) -> float:
        return sum(k.layers * k.tokens * k.bytes_per_token for k in ks)

    assert total_bytes(fused) == pytest.approx(total_bytes(plain), rel=1e-12)


def test_trtllm_attention_dp_keeps_its_norm_kernels() -> None:
    d = Deployment(name="dp8", nodes=1, attn_tp=1, engine="trtllm")
    cm = ServingCostModel(V3, H200, d, load_profile("h200-trtllm"))
    kernels = ew.rank_kernels(cm.ctx, segments(4), "trtllm")
    assert launches(kernels, "residual_add_norm") == (2 * V3.num_layers, 0)
    assert launches(kernels, "final_norm") == (1, 0)


def test_sglang_graph_decode_overlaps_the_latent_norms() -> None:
    cm = ServingCostModel(V3, H200, tp8("sglang"), load_profile("h200-sglang"))
    decode = ew.rank_kernels(cm.ctx, segments(4), "sglang")
    assert launches(decode, "kv_a_norm") == (0, V3.attention_layers)
    assert launches(decode, "q_a_norm") == (V3.attention_layers, 0)
    prefill = ew.rank_kernels(cm.ctx, segments(1, decode=False, q=1024.0), "sglang")
    assert launches(prefill, "kv_a_norm") == (V3.attention_layers, 0)


def test_a_fused_kernel_costs_what_its_bytes_add() -> None:
    cm = ServingCostModel(V3, H200, tp8("trtllm"), load_profile("h200-trtllm"))
    k = ew.Kernel(name="n", tokens=4096, bytes_per_token=ew.add_rmsnorm_bytes(7168))
    alone = ew.kernel_time(cm.pricer, k).seconds
    inside = ew.kernel_time(
        cm.pricer,
        ew.Kernel(name="n", tokens=4096, bytes_per_token=k.bytes_per_token, launched=False),
    ).seconds
    assert alone - inside == pytest.approx(SMALL_KERNEL_US["trtllm"] * 1e-6, rel=1e-6)


def step(
    engine: str | None, batch: BatchShape, profile: str = "h200-sglang", **kw: object
) -> StepCost:
    return ServingCostModel(V3, H200, tp8(engine, **kw), load_profile(profile)).step_cost(batch)


def test_graph_decode_runs_the_shared_experts_beside_the_routed_ones() -> None:
    batch = decode_batch(1, 4, 2048)
    for engine, profile in (("sglang", "h200-sglang"), ("trtllm", "h200-trtllm")):
        st = step(engine, batch, profile)
        total = sum(t.seconds for t in st.ops.values())
        routed = sum(st.ops[n].seconds for n in ROUTED_SIDE if n in st.ops)
        hidden = min(st.ops["moe_shared"].seconds, routed)
        assert hidden == st.ops["moe_shared"].seconds > 0  # 4 tokens: the routed side is longer
        assert st.overlap_saved_s == pytest.approx(hidden, rel=1e-12)
        assert st.duration_s == pytest.approx(total - hidden, rel=1e-12)
    generic = step(None, batch)
    assert generic.duration_s == pytest.approx(sum(t.seconds for t in generic.ops.values()))
    assert generic.overlap_saved_s == 0.0
    vllm = step("vllm", batch, "h200-vllm")
    assert vllm.overlap_saved_s == 0.0


def test_no_second_stream_for_prefill_eager_decode_or_sglang_deepep() -> None:
    prefill = BatchShape(
        num_ranks=1,
        rank=np.zeros(2, dtype=np.int64),
        new_tokens=np.array([1, 1024]),
        kv_tokens=np.array([2048, 1024]),
        is_decode=np.array([True, False]),
    )
    assert step("sglang", prefill).overlap_saved_s == 0.0
    # above the captured batch (512 requests at TP8) decode runs eagerly, in line
    assert step("sglang", decode_batch(1, 600, 256)).overlap_saved_s == 0.0
    assert step("sglang", decode_batch(1, 512, 256)).overlap_saved_s > 0.0
    # SGLang with EP: DeepEP's path runs the shared experts in line; TensorRT-LLM's does not
    assert step("sglang", decode_batch(1, 4, 2048), moe_tp=1).overlap_saved_s == 0.0
    ep8 = step("trtllm", decode_batch(1, 4, 2048), "h200-trtllm", moe_tp=1)
    assert ep8.overlap_saved_s == pytest.approx(ep8.ops["moe_shared"].seconds)


def test_a_profile_op_without_a_table_pays_the_engines_launch() -> None:
    """h200-sglang holds no mla_prefill table: the roofline prices SGLang's prefill attention,
    and with `engine: sglang` each call pays SGLang's kernel in a graph, not the profile's
    launch figure; ops with a table keep the table's own fixed part."""
    profile = load_profile("h200-sglang")
    assert not any(t.op == "mla_prefill" for t in profile.tables)
    prompt = BatchShape(
        num_ranks=1,
        rank=np.zeros(1, dtype=np.int64),
        new_tokens=np.array([1024]),
        kv_tokens=np.array([1024]),
        is_decode=np.array([False]),
    )
    sglang, generic = step("sglang", prompt), step(None, prompt)
    delta = profile.roofline.launch_overhead_us.value - SMALL_KERNEL_US["sglang"]
    assert delta > 3.0  # 5.22 us against 1.93 us a kernel
    attn = generic.ops["attn_prefill"].seconds - sglang.ops["attn_prefill"].seconds
    assert attn == pytest.approx(V3.attention_layers * delta * 1e-6, rel=1e-9)
    for op in ("attn_proj", "moe_routed", "lm_head"):  # from tables: the same either way
        assert sglang.ops[op].seconds == generic.ops[op].seconds
