"""The seed articles' tables, number for number, within their printed rounding."""

from __future__ import annotations

import pytest

from sim.catalog import load_model
from sim.cost import mla
from sim.cost.intensity import gqa_decode_intensity, mla_decode_intensity, model_decode_intensity

V3 = load_model("deepseek-v3")
K3 = load_model("kimi-k3")


def gflops(x: float) -> float:
    return round(float(x) / 1e9, 1)


@pytest.mark.parametrize(
    ("q", "k", "expand", "absorb"),
    [
        (1, 8192, 275.5, 2.3),  # decode at 8K context
        (8192, 8192, 3024.0, 9621.9),  # prefill 8K
        (64, 32768 + 64, 1273.6, 586.8),  # 64 new tokens after a 32K prefix
        (512, 32768 + 512, 2501.8, 4726.7),  # 512 new tokens after a 32K prefix
    ],
)
def test_seed000_deepseek_v3_per_layer_gflops(q: int, k: int, expand: float, absorb: float) -> None:
    m = V3.mla_spec
    assert gflops(mla.expand_flops(m, q, k, heads=128)) == expand
    assert gflops(mla.absorb_flops(m, q, k, heads=128)) == absorb


def test_seed000_pair_and_token_costs() -> None:
    m = V3.mla_spec
    assert round(mla.expand_pair_flops(m, 128) / 1e3) == 82
    assert round(mla.absorb_pair_flops(m, 128) / 1e3) == 279
    assert round(mla.absorb_pair_flops(m, 128) / mla.expand_pair_flops(m, 128), 1) == 3.4
    assert round(mla.projection_flops_per_token(m, 128) / 1e6, 1) == 33.6
    # q* for long caches: the per-token projection over the per-pair difference
    assert round(float(mla.crossover_q(m, 10**12))) == 171


def test_seed000_intensity_mla_vs_gqa() -> None:
    assert round(model_decode_intensity(V3)) == 242
    assert gqa_decode_intensity(heads=64, kv_heads=8) == 8.0  # 64 q heads, 8 KV heads, BF16


@pytest.mark.parametrize(
    ("L", "mla_g", "mla_mb", "mla_ai", "mha_g", "mha_mb"),
    [
        (2048, 0.43, 2.10, 204, 51.6, 103),
        (8192, 1.64, 8.39, 195, 207, 411),
        (32768, 6.47, 33.6, 193, 826, 1640),
    ],
)
def test_seed002_kimi_k3_decode_table(
    L: int, mla_g: float, mla_mb: float, mla_ai: int, mha_g: float, mha_mb: float
) -> None:
    m, h = K3.mla_spec, K3.num_heads
    per_token = 2.0 * (m.kv_lora_rank + m.qk_rope_head_dim)
    f_mla = mla.absorb_flops(m, 1, L, heads=h, rope=False)
    b_mla = mla.absorb_bytes(m, L, kv_bytes_per_token=per_token, rope=False)
    f_mha = mla.expand_flops(m, 1, L, heads=h, rope=False)
    b_mha = mla.expand_bytes(m, L, heads=h, kv_bytes_per_token=per_token, rope=False)
    assert f_mla / 1e9 == pytest.approx(mla_g, abs=0.006)
    assert b_mla / 1e6 == pytest.approx(mla_mb, rel=0.006)
    assert round(f_mla / b_mla) == mla_ai
    assert f_mha / 1e9 == pytest.approx(mha_g, rel=0.004)
    assert b_mha / 1e6 == pytest.approx(mha_mb, rel=0.006)
    assert round(f_mha / b_mha) == 503
    if L == 2048:  # "MLA needs 120x fewer FLOPs"
        assert f_mha / f_mla == pytest.approx(120, rel=0.01)


@pytest.mark.parametrize(
    ("L", "mla_t", "mha_t", "ratio"),
    [(2048, 0.464, 0.155, 3.00), (8192, 6.80, 1.86, 3.67), (32768, 106, 27.2, 3.91)],
)
def test_seed002_kimi_k3_prefill_table(L: int, mla_t: float, mha_t: float, ratio: float) -> None:
    m, h = K3.mla_spec, K3.num_heads
    f_mla = mla.absorb_flops(m, L, L, heads=h, rope=False) / 1e12
    f_mha = mla.expand_flops(m, L, L, heads=h, rope=False) / 1e12
    assert f_mla == pytest.approx(mla_t, rel=0.006)
    assert f_mha == pytest.approx(mha_t, rel=0.006)
    assert round(f_mla / f_mha, 2) == ratio


@pytest.mark.parametrize(
    ("L", "dense_g", "gap"),
    [(2048, 68.9, 121), (8192, 275, 483), (32768, 1100, 1931), (131072, 4410, 7725)],
)
def test_seed002_dsa_table_deepseek_v3(L: int, dense_g: float, gap: int) -> None:
    m, topk = V3.mla_spec, 2048
    sparse = mla.absorb_flops(m, 1, L, heads=128, rope=False, pairs=mla.sparse_pairs(1, L, topk))
    dense = mla.expand_flops(m, 1, L, heads=128, rope=False)
    assert round(sparse / 1e9, 2) == 0.57  # flat once L passes top-k
    assert dense / 1e9 == pytest.approx(dense_g, rel=0.004)
    assert round(float(dense / sparse)) == gap


def test_seed002_intensity_with_rope_and_crossover_range() -> None:
    assert round(model_decode_intensity(V3), 1) == 241.8
    assert round(model_decode_intensity(K3), 1) == 181.3
    m = K3.mla_spec
    assert float(mla.crossover_q(m, 512)) == pytest.approx(128.0)
    assert float(mla.crossover_q(m, 131072)) == pytest.approx(171, abs=1.0)
    # the crossover is the same for 96 and 128 heads: H cancels
    assert float(mla.crossover_q(V3.mla_spec, 4096)) == float(mla.crossover_q(m, 4096))


def test_seed002_appendix_per_pair_macs() -> None:
    m, h = K3.mla_spec, K3.num_heads
    per_head = lambda f: f / (2 * h)  # noqa: E731 - MACs per head
    assert per_head(mla.absorb_pair_flops(m, h)) == 1088
    assert per_head(mla.expand_pair_flops(m, h)) == 320
    assert per_head(mla.absorb_pair_flops(m, h, rope=False)) == 1024
    assert per_head(mla.expand_pair_flops(m, h, rope=False)) == 256


def test_fp8_kv_doubles_intensity() -> None:
    # seed 000 exercise: 576 FP8 bytes per token (scales left out) -> ~484 FLOP/B
    assert round(mla_decode_intensity(128, 512, 64, kv_bytes_per_token=576)) == 484
    # FlashMLA's real FP8 layout (656 B) still lands far above the H800 ridge (~295)
    assert model_decode_intensity(V3, kv_dtype="fp8") > 400


def test_mtp_multiplies_intensity() -> None:
    s1, s2 = model_decode_intensity(V3, 1), model_decode_intensity(V3, 2)
    assert s2 == pytest.approx(2 * s1)
    assert gqa_decode_intensity(64, 8, 2) == 16.0
