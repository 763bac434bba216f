"""Memory, KV duplication and the MLA dispatch policies."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.catalog import load_gpu, load_model
from sim.cost import mla
from sim.cost.dispatch import (
    ABSORB,
    EXPAND,
    EXPAND_CHUNKED,
    SPARSE_ABSORB,
    Segments,
    choose_paths,
    policy_names,
)
from sim.cost.memory import WEIGHT_BYTES, kv_dup_factor, plan_memory
from sim.cost.params import layer_params, total_params
from sim.specs import Deployment

V3, V32, QWEN = (
    load_model("deepseek-v3"),
    load_model("deepseek-v3.2"),
    load_model("qwen3-235b-a22b"),
)
H200 = load_gpu("h200")


def seg(q: list[int], k: list[int], dec: list[bool]) -> Segments:
    return Segments(new_tokens=np.array(q), kv_tokens=np.array(k), is_decode=np.array(dec))


def test_parameter_counts_match_published_totals() -> None:
    assert total_params(V3) / 1e9 == pytest.approx(671, rel=0.005)
    assert total_params(load_model("kimi-k2")) / 1e12 == pytest.approx(1.04, rel=0.02)
    assert total_params(QWEN) / 1e9 == pytest.approx(235, rel=0.005)


def test_tp8_duplicates_the_latent_eight_times() -> None:
    tp8 = plan_memory(V3, H200, Deployment(name="tp8", attn_tp=8, moe_tp=8))
    dp8 = plan_memory(V3, H200, Deployment(name="dp8", attn_tp=1))
    assert tp8.kv_dup_factor == 8 and dp8.kv_dup_factor == 1
    assert tp8.kv_bytes_per_token_per_gpu == 576 * 61 * 2
    # DP attention replicates attention weights, so not quite 8x the distinct tokens
    ratio = dp8.kv_capacity_tokens_total / tp8.kv_capacity_tokens_total
    assert 3 < ratio < 8
    assert dp8.weights_bytes_per_gpu > tp8.weights_bytes_per_gpu


def test_mtp_and_fp8_and_dsa_change_bytes_per_token() -> None:
    base = plan_memory(V3, H200, Deployment(name="a")).kv_bytes_per_token_per_gpu
    mtp = plan_memory(V3, H200, Deployment(name="b", mtp_draft_tokens=1, mtp_acceptance=(0.8,)))
    assert mtp.kv_bytes_per_token_per_gpu == base + 576 * 2  # the MTP layer's own KV
    fp8 = plan_memory(V3, H200, Deployment(name="c", kv_dtype="fp8"))
    # dense MLA stores FP8 KV at one scale per tensor: 576 B, half of BF16 (2.0x the tokens)
    assert fp8.kv_bytes_per_token_per_gpu == 576 * 61
    dsa = plan_memory(V32, H200, Deployment(name="d"))
    assert dsa.kv_bytes_per_token_per_gpu == (1152 + 132) * 61
    # DSA's sparse kernels read FlashMLA's sparse FP8 layout: 512 FP8 + 4 fp32 scales + 64 BF16
    dsa_fp8 = plan_memory(V32, H200, Deployment(name="e", kv_dtype="fp8"))
    assert dsa_fp8.kv_bytes_per_token_per_gpu == (656 + 132) * 61
    dense_fp8 = plan_memory(V32, H200, Deployment(name="f", kv_dtype="fp8", dsa="off"))
    assert dense_fp8.kv_bytes_per_token_per_gpu == 576 * 61


def test_mtp_on_a_model_without_mtp_modules_holds_an_assumed_one() -> None:
    """Qwen3 ships no MTP module: drafting holds one of DeepSeek's shape (an MoE decoder layer
    and its 2d -> d projection), its weights and its layer's KV, as the step prices it."""
    qwen = load_model("qwen3-235b-a22b")
    assert qwen.mtp_layers == 0
    dep = Deployment(name="tp8", attn_tp=8, moe_tp=8)
    base = plan_memory(qwen, H200, dep)
    mtp = plan_memory(qwen, H200, dep.model_copy(update={"mtp_draft_tokens": 1}))
    layers = qwen.attention_layers
    assert mtp.kv_bytes_per_token_per_gpu == pytest.approx(
        base.kv_bytes_per_token_per_gpu * (layers + 1) / layers
    )
    lp, d = layer_params(qwen), qwen.hidden_size
    fp8_params = lp.attn_sharded / 8 + lp.attn_replicated + 128 * lp.routed_expert / 8
    bf16_params = lp.router + 2 * d * d  # router and eh_proj stay BF16
    extra = mtp.weights_bytes_per_gpu - base.weights_bytes_per_gpu
    assert extra == pytest.approx(fp8_params * WEIGHT_BYTES["fp8"] + 2 * bf16_params, rel=1e-9)


def test_gqa_duplicates_only_beyond_kv_heads() -> None:
    assert kv_dup_factor(QWEN, 4) == 1
    assert kv_dup_factor(QWEN, 8) == 2
    assert kv_dup_factor(V3, 4) == 4


def test_does_not_fit_says_by_how_much() -> None:
    with pytest.raises(ValueError, match=r"exceed the usable .* by \d+\.\d GB"):
        plan_memory(V3, load_gpu("h800"), Deployment(name="x", attn_tp=8, moe_tp=8))


def test_does_not_fit_suggests_smaller_weights_only_when_there_are() -> None:
    h20 = load_gpu("h20")
    with pytest.raises(ValueError, match=r"use FP8 weights \(weight_dtype: fp8\)"):
        plan_memory(
            QWEN, h20, Deployment(name="bf16", nodes=1, gpus_per_node=1, weight_dtype="bf16")
        )
    with pytest.raises(ValueError, match="does not fit") as fp8:
        plan_memory(QWEN, h20, Deployment(name="fp8", nodes=1, gpus_per_node=1))
    assert "FP8 weights" not in str(fp8.value) and "weight_dtype: fp4" in str(fp8.value)


def test_heads_must_divide_attention_tp() -> None:
    six = Deployment(name="y", gpus_per_node=6, attn_tp=6)  # 64 heads do not split 6 ways
    with pytest.raises(ValueError, match="does not divide qwen3-235b-a22b's 64 attention heads"):
        plan_memory(QWEN, H200, six)


def test_redundant_experts_must_spread_evenly_over_ep() -> None:
    """256 + 5 experts on EP8 would pad every GPU to 33, the memory of 8 redundant ones."""
    odd = Deployment(name="odd", attn_tp=1, eplb_redundant_experts=5)
    with pytest.raises(ValueError, match=r"256 \+ 5 experts .* EP8 .* use one of 8, 16, 24"):
        plan_memory(V3, H200, odd)
    plan_memory(V3, H200, odd.model_copy(update={"eplb_redundant_experts": 8}))


def test_sglang_rules() -> None:
    p = choose_paths("sglang", V3, seg([1, 1], [9000, 100], [True, True]))
    assert list(p) == [ABSORB, ABSORB]  # decode always absorbs
    p = choose_paths("sglang", V3, seg([4096], [4096], [False]))
    assert list(p) == [EXPAND]  # no prefix: MHA one shot
    p = choose_paths("sglang", V3, seg([512], [4608], [False]))
    assert list(p) == [ABSORB]  # prefix 4096 < 8192: MLA
    p = choose_paths("sglang", V3, seg([512], [9000], [False]))
    assert list(p) == [EXPAND]  # prefix >= 8192: MHA
    p = choose_paths("sglang", V3, seg([512, 512], [70000, 70000], [False, False]))
    assert list(p) == [EXPAND_CHUNKED] * 2  # total KV above 131072: chunked


def test_sglang_dsa_rules() -> None:
    p = choose_paths("sglang", V32, seg([1000, 1], [2000, 50000], [False, True]), sparse=True)
    assert list(p) == [EXPAND, SPARSE_ABSORB]  # short extend dense, decode sparse
    p = choose_paths("sglang", V32, seg([1000], [3000], [False]), sparse=True)
    assert list(p) == [SPARSE_ABSORB]
    p = choose_paths("sglang", V32, seg([1, 2], [500, 90000], [True, True]), sparse=True)
    assert list(p) == [SPARSE_ABSORB] * 2  # decode and verify always sparse
    n = 64  # 64 x 2048 = 131072 KV tokens: one chunk still holds the batch
    p = choose_paths("sglang", V32, seg([2048] * n, [2048] * n, [False] * n), sparse=True)
    assert set(p) == {EXPAND}
    n = 65  # one more short prompt and the batch no longer fits: sparse MLA for all
    p = choose_paths("sglang", V32, seg([2048] * n, [2048] * n, [False] * n), sparse=True)
    assert set(p) == {SPARSE_ABSORB}


def test_flops_optimal_follows_the_crossover() -> None:
    p = choose_paths(
        "flops_optimal", V3, seg([64, 512, 8192], [32832, 33280, 8192], [False, False, False])
    )
    assert p[0] == ABSORB and p[1] in (EXPAND, EXPAND_CHUNKED) and p[2] == EXPAND


def test_unknown_policy_lists_known() -> None:
    with pytest.raises(ValueError, match="known policies are flops_optimal, sglang, vllm"):
        choose_paths("nope", V3, seg([1], [2], [True]))
    assert policy_names() == ["flops_optimal", "sglang", "vllm"]


@given(st.integers(1, 1 << 20), st.integers(1, 1 << 20))
def test_crossover_monotone_in_cache_length(a: int, b: int) -> None:
    lo, hi = sorted((a, b))
    assert mla.crossover_q(V3.mla_spec, lo) <= mla.crossover_q(V3.mla_spec, hi) + 1e-9


@given(st.integers(1, 4096), st.integers(0, 1 << 16))
def test_crossover_separates_the_paths(q: int, prefix: int) -> None:
    m, k = V3.mla_spec, q + prefix
    qs = float(mla.crossover_q(m, k))
    e, a = mla.expand_flops(m, q, k, heads=128), mla.absorb_flops(m, q, k, heads=128)
    # the closed form counts q*k pairs; causal pairs shift the exact tie slightly toward expand
    if q < 0.9 * qs:
        assert a < e
    if q > 2.0 * qs:
        assert e < a


@given(st.sampled_from([1, 2, 4, 8]))
def test_duplication_equals_attention_tp(tp: int) -> None:
    plan = plan_memory(V3, H200, Deployment(name="x", attn_tp=tp))
    assert plan.kv_dup_factor == tp


def test_gpu_memory_is_what_the_device_exposes() -> None:
    """Deployments divide the memory CUDA sees (nvidia-smi memory.total): an H200 shows 143,771
    MiB, an '80 GB' H800 81,559 MiB. Without that figure, the datasheet GB is read as GiB."""
    h200, h800 = load_gpu("h200"), load_gpu("h800")
    assert h200.hbm_bytes == 143_771 * 2**20 and h200.hbm_bytes > 150e9
    assert h800.hbm_bytes == 81_559 * 2**20
    bare = h800.model_copy(update={"hbm_usable_mib": None})
    assert bare.hbm_bytes == 80 * 2**30
