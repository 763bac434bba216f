"""Calibration page: a bundled profile's curves against the roofline, an uploaded profile's
measured crossover, and a clear message for a file that is not a profile."""

from __future__ import annotations

import json

import pytest
from app_helpers import error, figures, metrics, open_page

from app.pages_ import calibration
from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost import mla
from sim.cost.roofline import roofline_seconds


def test_roofline_us_uses_each_points_work() -> None:
    profile, gpu = load_profile("h800-published"), load_gpu("h800")
    table = next(t for t in profile.tables if t.op == "mla_decode")
    ideal = calibration.roofline_us(table, gpu)
    p = table.points[0]
    assert ideal[0] == pytest.approx(roofline_seconds(gpu, p.flops, p.hbm_bytes, table.dtype) * 1e6)
    # a real kernel never beats the datasheet roofline
    assert all(r <= q.latency_us_p50 * 1.001 for r, q in zip(ideal, table.points, strict=True))


def test_curve_holds_other_axes_fixed() -> None:
    profile, gpu = load_profile("h800-published"), load_gpu("h800")
    table = next(t for t in profile.tables if t.op == "mla_decode")
    x_axis, other = list(table.axes)
    fixed = {other: table.axes[other][0]}
    c = calibration.curve(table, x_axis, fixed, gpu)
    assert c["x"] == sorted(table.axes[x_axis])
    assert len(c["measured"]) == len(table.axes[x_axis])


def test_bundled_profile_page() -> None:
    at = open_page("Calibration")
    assert at.selectbox(key="cal_profile").value == "h800-published"
    m = metrics(at)
    assert int(m["points on this curve"]) >= 3
    best = float(m["best fraction of roofline"].rstrip("%"))
    assert 0 < best <= 100
    fig = figures(at)[0]
    assert [t["name"] for t in fig["data"]] == ["measured p50", "roofline"]
    assert fig["layout"]["title"]["text"].startswith("mla_decode (flash_mla, bf16)")
    at.selectbox(key="cal_op").set_value("gemm").run()
    assert figures(at)[0]["layout"]["title"]["text"].startswith("gemm")
    assert any("no crossover" in i.value for i in at.info)
    assert not at.exception


def _profile_with_crossover() -> bytes:
    data = json.loads(load_profile("h800-roofline").model_dump_json())
    m = load_model("deepseek-v3")
    s = m.mla_spec
    data["name"] = "h800-test"
    data["kind"] = "measured"
    data["model_shape"] = {
        "model": "deepseek-v3", "heads": m.num_heads, "kv_lora_rank": s.kv_lora_rank,
        "qk_rope_head_dim": s.qk_rope_head_dim, "qk_nope_head_dim": s.qk_nope_head_dim,
        "v_head_dim": s.v_head_dim, "hidden_size": m.hidden_size,
    }  # fmt: skip
    data["crossover"] = [
        {
            "prefix_len_tokens": 32768, "new_tokens": [16, 64, 256, 1024],
            "absorb_us": [50.0, 120.0, 400.0, 1500.0], "expand_us": [300.0, 320.0, 360.0, 500.0],
            "status": "crossed", "crossover_new_tokens": 190.0,
        }
    ]  # fmt: skip
    return json.dumps(data).encode()


def test_uploaded_profile_shows_measured_crossover() -> None:
    at = open_page("Calibration")
    at.selectbox(key="cal_profile").set_value(calibration.UPLOAD).run()
    at.file_uploader(key="cal_upload").upload("mine.json", _profile_with_crossover()).run()
    assert not at.exception
    assert not at.error
    assert metrics(at)["measured crossover (new tokens)"] == "190"
    table = next(d.value for d in at.dataframe if "FLOPs crossover q*" in d.value.columns)
    assert table["measured crossover"].tolist() == ["190"]
    analytic = float(mla.crossover_q(load_model("deepseek-v3").mla_spec, 32768))
    assert table["FLOPs crossover q*"].tolist() == [round(analytic, 1)]
    fig = figures(at)[-1]
    assert {t["name"] for t in fig["data"]} == {"expand (measured)", "absorb (measured)"}


def test_upload_that_is_not_a_profile_is_reported() -> None:
    at = open_page("Calibration")
    at.selectbox(key="cal_profile").set_value(calibration.UPLOAD).run()
    at.file_uploader(key="cal_upload").upload("bad.json", b'{"hello": 1}').run()
    assert not at.exception
    assert "not a calibration profile" in error(at)
    at.file_uploader(key="cal_upload").upload("v9.json", b'{"schema_version": 9}').run()
    assert "schema_version 9 is not supported" in error(at)


def test_crossover_rows_name_the_winner_when_curves_do_not_cross() -> None:
    profile = load_profile("h800-roofline").model_validate_json(_profile_with_crossover())
    point = profile.crossover[0].model_copy(
        update={"status": "absorb_faster", "crossover_new_tokens": None}
    )
    rows = calibration.crossover_rows(profile.model_copy(update={"crossover": [point]}))
    assert rows[0]["measured crossover"] == "absorb faster throughout"


def test_run_notes_put_what_was_not_measured_first() -> None:
    data = json.loads(_profile_with_crossover())
    data["notes"] = [
        "mla_decode bf16 [torch_bmm]: relative error 1.2e-03 (bound 1e-02) ok",
        "kernels_calib.moe: stopped (time limit spent before 'moe_up ...'); tables kept",
    ]
    at = open_page("Calibration")
    at.selectbox(key="cal_profile").set_value(calibration.UPLOAD).run()
    at.file_uploader(key="cal_upload").upload("mine.json", json.dumps(data).encode()).run()
    assert not at.exception
    notes = next(d.value for d in at.dataframe if "note" in d.value.columns)
    assert notes["note"].tolist()[0].startswith("kernels_calib.moe: stopped")
    assert notes[""].tolist() == ["!", ""]
    assert at.expander[-1].label == "Run notes: 2, 1 flagged"


def test_roofline_gpu_follows_the_profile_and_warns_when_changed() -> None:
    at = open_page("Calibration")
    assert at.selectbox(key="cal_gpu_h800-published").value == "h800"
    at.selectbox(key="cal_profile").set_value("h20-published").run()
    assert at.selectbox(key="cal_gpu_h20-published").value == "h20"  # not the h800 left over
    assert not at.warning
    best_own = float(metrics(at)["best fraction of roofline"].rstrip("%"))
    at.selectbox(key="cal_gpu_h20-published").set_value("h800").run()
    assert "measured on" in at.warning[0].value and "h800 datasheet" in at.warning[0].value
    best_h800 = float(metrics(at)["best fraction of roofline"].rstrip("%"))
    assert best_h800 < best_own  # H20 kernels look poor against an H800's roofline
    assert not at.exception
