"""Physics page: the seed articles' numbers, read off the page's metric cards and figures."""

from __future__ import annotations

import numpy as np
import pytest
from app_helpers import figures, metrics, open_page

from app.pages_ import physics
from sim.catalog import load_gpu, load_model
from sim.cost import mla


def test_crossing_matches_closed_form() -> None:
    model = load_model("deepseek-v3")
    q = physics.crossing_q(model, 32768)
    assert q is not None
    # the closed form uses P ~ q k; at the exact crossing it agrees within a token
    assert q == pytest.approx(float(mla.crossover_q(model.mla_spec, 32768 + q)), abs=1.0)
    assert 165 < q < 172
    assert physics.crossing_q(model, 0) is None  # plain prefill: expand always cheaper


def test_roofline_points_fp8_doubles_mla_intensity() -> None:
    model = load_model("deepseek-v3")
    bf16 = {
        (p.family, p.s_query): p.flop_per_byte for p in physics.roofline_points(model, 8, "bf16")
    }
    fp8 = {(p.family, p.s_query): p.flop_per_byte for p in physics.roofline_points(model, 8, "fp8")}
    assert bf16[("MLA", 1)] == pytest.approx(241.8, abs=0.1)
    assert bf16[("MQA", 1)] == 128 and bf16[("GQA", 1)] == 16 and bf16[("MHA", 1)] == 1
    assert bf16[("MLA", 3)] == pytest.approx(3 * bf16[("MLA", 1)])
    assert fp8[("MLA", 1)] == pytest.approx(2 * 241.8 * 1152 / 1312, rel=1e-3)  # 656 B/token


def test_dsa_series_flat_attention_growing_indexer() -> None:
    model, gpu = load_model("deepseek-v3.2"), load_gpu("h200")
    ctx = np.array([1024.0, 4096.0, 16384.0, 131072.0])
    s = physics.dsa_series(model, gpu, ctx)
    # flat on both sides of top-k = 2048: the kernel visits every top-k slot (priced slots)
    assert s["sparse attention"][0] == pytest.approx(s["sparse attention"][3], rel=1e-6)
    assert s["sparse attention"][1] == pytest.approx(s["sparse attention"][3], rel=1e-6)
    assert s["dense attention"][3] > 20 * s["dense attention"][1]
    assert s["indexer"][3] > s["indexer"][1]
    assert np.allclose(s["sparse + indexer"], s["sparse attention"] + s["indexer"])


def test_page_shows_seed_table_values() -> None:
    at = open_page("Physics")
    at.selectbox(key="phys_model").set_value("deepseek-v3").run()
    at.number_input(key="phys_prefix").set_value(32768).run()
    at.number_input(key="phys_q").set_value(64).run()
    m = metrics(at)
    assert m["expand GFLOPs / layer"] == "1,273.6"
    assert m["absorb GFLOPs / layer"] == "586.8"
    assert m["cheaper path"] == "absorb"
    assert m["crossover q*"] == "170"
    at.number_input(key="phys_q").set_value(512).run()
    m = metrics(at)
    assert (m["expand GFLOPs / layer"], m["absorb GFLOPs / layer"]) == ("2,501.8", "4,726.7")
    assert m["cheaper path"] == "expand"
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert titles[0] == "One layer, 32,768 cached prefix tokens"
    assert not at.exception


def test_page_roofline_per_gpu() -> None:
    at = open_page("Physics")
    at.selectbox(key="phys_model").set_value("deepseek-v3").run()
    m = metrics(at)
    assert m["ridge point"] == "206 FLOP/B"  # H200
    assert m["MLA decode AI (S=1)"] == "241.8 FLOP/B"
    assert m["MLA compute-bound from"] == "S = 1"
    at.selectbox(key="phys_gpu").set_value("h800").run()
    m = metrics(at)
    assert m["ridge point"] == "295 FLOP/B"
    assert m["MLA compute-bound from"] == "S = 2"  # MTP verify tips MLA over the ridge
    roof = next(
        f
        for f in figures(at)
        if "roofline" in str(f["layout"]["title"]).lower()
        or "Decode attention" in str(f["layout"]["title"])
    )
    names = {t.get("name") for t in roof["data"]}
    assert {"MHA", "GQA", "MQA", "MLA"} <= names
    mla_trace = next(t for t in roof["data"] if t.get("name") == "MLA")
    assert mla_trace["text"] == ["S=1", "S=2", "S=3", "S=4"]


def test_page_dsa_section() -> None:
    at = open_page("Physics")  # deepseek-v3.2 by default
    m = metrics(at)
    # 2H d_c (d_k + d_v) = 33.55M per new token + 278,528 FLOPs per pair (RoPE included)
    assert m["dense absorb @128K"] == "36.54 GFLOPs"  # 131,072 pairs
    # both 2,048 pairs at 128K: the ideal min(L, top-k) and the top-k slots the kernel visits
    assert m["sparse absorb @128K, ideal"] == "0.60 GFLOPs"
    assert m["sparse absorb @128K, priced"] == "0.60 GFLOPs"
    share = m["indexer share of sparse decode @128K"]
    assert share.endswith("%") and 50 < int(share.rstrip("%")) < 100
    dsa = figures(at)[-1]
    assert {t["name"] for t in dsa["data"]} == {
        "dense attention", "sparse attention", "indexer", "sparse + indexer",
    }  # fmt: skip
    at.selectbox(key="phys_model").set_value("kimi-k2").run()
    assert any("no DSA indexer" in i.value for i in at.info)
    assert not at.exception


def test_gqa_model_skips_mla_only_views() -> None:
    at = open_page("Physics")
    at.selectbox(key="phys_model").set_value("qwen3-235b-a22b").run()
    assert not at.exception
    infos = " ".join(i.value for i in at.info)
    assert "absorb vs expand applies to MLA only" in infos and "no DSA indexer" in infos
    m = metrics(at)
    # 64 heads over DeepSeek's latent: H (2 d_c + d_s) / (d_c + d_s) = 64 * 1088 / 576
    assert m["MLA (hypothetical latent) decode AI (S=1)"] == "120.9 FLOP/B"
    assert "MLA decode AI (S=1)" not in m  # Qwen3 has no latent: the point is labelled as made up
    table = next(d.value for d in at.dataframe if "FLOP/byte" in d.value.columns)
    assert "MLA" not in set(table["family"]) and "MLA (hypothetical latent)" in set(table["family"])
    assert any("its MLA points are hypothetical" in c.value for c in at.caption)
