"""What-if page: set inputs, run, and read the numbers the page shows."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_helpers import array, figures, open_page
from streamlit.testing.v1 import AppTest

from app import components, export
from app.pages_.whatif import DEFAULT
from sim.catalog import CATALOG_DIR
from sim.io.scenario_io import parse_scenario


def _cards(at: AppTest) -> list[tuple[str, str, str]]:
    return [(m.label, m.value, m.delta or "") for m in at.metric]


def _number(value: str) -> float:
    """A card's figure, without its interval (`464 ±2.6%` -> 464)."""
    return float(value.split(" ±")[0].replace(",", ""))


def test_default_run_shows_cards_and_charts() -> None:
    at = open_page("What-if")
    assert any("Press Run" in i.value for i in at.info)
    assert not at.metric  # nothing is simulated before Run
    at.button(key="wi_run").click().run()
    assert not at.exception and not at.error
    cards = _cards(at)
    assert len(cards) == 12  # six cards per deployment
    assert all(_number(v) >= 0 for _, v, _ in cards)
    dup = [v for label, v, _ in cards if label == "KV dup factor"]
    assert dup == ["8", "1"]  # TP8 keeps the latent on every GPU; DP attention once
    cap = [_number(v) for label, v, _ in cards if label == "KV tokens (distinct)"]
    assert cap[1] > 3 * cap[0]
    deltas = [d for _, _, d in cards[6:]]
    assert all(d.endswith("vs baseline") for d in deltas if d)
    tput = [_number(v) for label, v, _ in cards if label == "out tok/s/GPU"]
    assert all(t > 0 for t in tput)
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert titles[0] == "Per-GPU memory"
    assert "TTFT distribution" in titles
    assert "Mean step time by op [time source]" in titles
    breakdown = next(f for f in figures(at) if f["layout"]["title"]["text"].startswith("Mean step"))
    assert all(t["name"].endswith("[roofline]") for t in breakdown["data"])
    cdf = next(f for f in figures(at) if f["layout"]["title"]["text"] == "TTFT distribution")
    assert [t["name"] for t in cdf["data"]] == ["tp8", "dp8_ep8"]
    assert all(array(t, "y")[-1] == pytest.approx(1.0) for t in cdf["data"])
    assert [b.label for b in at.download_button][-2:] == ["results JSON", "results CSV"]
    at.segmented_control(key="wi_cdf_metric").set_value("TPOT").run()
    tpot = next(f for f in figures(at) if f["layout"]["title"]["text"] == "TPOT distribution")
    p90 = [_number(v) / 1e3 for label, v, _ in _cards(at) if label == "TPOT p90 ms"]
    for trace, want in zip(tpot["data"], p90, strict=True):
        x, y = array(trace, "x"), array(trace, "y")
        at_p90 = x[next(i for i, f in enumerate(y) if f >= 0.9)]
        assert at_p90 == pytest.approx(want, rel=0.1)  # the card and the curve agree


def test_changed_deployment_reruns_and_exports(monkeypatch: pytest.MonkeyPatch) -> None:
    exported: list[str] = []
    real = export.scenario_yaml
    monkeypatch.setattr(
        export, "scenario_yaml", lambda sc: exported.append(real(sc)) or exported[-1]
    )
    at = open_page("What-if")
    at.number_input(key="dep0.attn_tp").set_value(4).run()
    at.button(key="wi_run").click().run()
    assert not at.exception and not at.error
    dup = [m.value for m in at.metric if m.label == "KV dup factor"]
    assert dup == ["4", "1"]
    scenario = parse_scenario(exported[-1])  # what `mlasim run` would read
    assert [(d.name, d.attn_tp) for d in scenario.deployments] == [("tp8", 4), ("dp8_ep8", 1)]
    assert scenario.workload.kind == "closed"
    caption = next(c.value for c in at.caption if c.value.startswith("scenario "))
    assert "deployments from the cache" in caption


def test_invalid_deployment_is_reported_not_raised() -> None:
    at = open_page("What-if")
    at.number_input(key="dep0.attn_tp").set_value(3).run()
    assert not at.exception
    message = at.error[0].value
    assert "Deployment 1 is invalid" in message and "attn_tp=3 must divide" in message
    assert not at.metric and not at.button  # nothing to run until it is fixed
    at.number_input(key="dep0.attn_tp").set_value(8).run()
    assert not at.error


def test_scenario_level_errors_name_the_field() -> None:
    at = open_page("What-if")
    at.text_input(key="dep1.name").set_value("dp 8").run()
    assert "not a valid identifier" in at.error[0].value
    at.text_input(key="dep1.name").set_value("dp8").run()
    at.number_input(key="dep1.mtp_draft_tokens").set_value(2).run()
    assert "mtp_acceptance has 0 values for mtp_draft_tokens=2" in at.error[0].value
    at.text_input(key="dep1.mtp_acceptance").set_value("0.8, lots").run()
    assert "mtp_acceptance" in at.error[0].value
    at.text_input(key="dep1.mtp_acceptance").set_value("0.8").run()
    assert not at.error and not at.exception


def test_memory_table_explains_duplication() -> None:
    at = open_page("What-if")
    mem = next(d.value for d in at.dataframe if "KV dup factor" in d.value.columns)
    assert mem["deployment"].tolist() == ["tp8", "dp8_ep8"]
    assert mem["KV dup factor"].tolist() == [8, 1]
    bars = figures(at)[0]
    dup_bar = next(t for t in bars["data"] if t["name"] == "KV (duplicated)")
    unique_bar = next(t for t in bars["data"] if t["name"] == "KV (unique)")
    dup_gb, unique_gb = array(dup_bar, "x"), array(unique_bar, "x")
    assert dup_gb[0] == pytest.approx(7 * unique_gb[0])  # 7 of the 8 copies are duplicates
    assert dup_gb[1] == 0


def test_load_sweep_button() -> None:
    at = open_page("What-if")
    at.number_input(key="run_duration").set_value(10.0).run()
    at.number_input(key="run_warmup").set_value(2.0).run()
    at.button(key="wi_sweep").click().run()
    assert not at.exception and not at.error
    fig = next(
        f for f in figures(at) if f["layout"]["title"]["text"] == "Throughput vs offered load"
    )
    assert [t["name"] for t in fig["data"]] == ["tp8", "dp8_ep8"]
    for trace in fig["data"]:
        base = DEFAULT["workload"]["concurrency"]
        assert array(trace, "x") == [base * f for f in (0.5, 1.0, 1.5, 2.0)]  # load x 0.5 .. 2
        assert all(y > 0 for y in array(trace, "y"))


def test_uploaded_model_config(tmp_path: Path) -> None:
    at = open_page("What-if")
    at.selectbox(key="wi_model").set_value(components.UPLOAD).run()
    assert any("Upload a HuggingFace config.json" in i.value for i in at.info)
    config = (CATALOG_DIR / "models" / "kimi-k2.json").read_bytes()
    at.file_uploader(key="wi_model_file").upload("config.json", config).run()
    assert not at.exception and not at.error
    mem = next(d.value for d in at.dataframe if "KV dup factor" in d.value.columns)
    assert mem["KV dup factor"].tolist() == [8, 1]  # Kimi K2 is MLA too
    at.file_uploader(key="wi_model_file").upload("config.json", b'{"hidden_size": 7}').run()
    assert not at.exception
    assert "is not a usable model config" in at.error[0].value


def test_parse_floats() -> None:
    assert components.parse_floats("0.8, 0.6") == (0.8, 0.6)
    assert components.parse_floats("") == ()
    assert components.parse_floats("0.8, x") == "0.8, x"  # left for the spec to reject


def _profiles(at: AppTest) -> set[str]:
    table = next(d.value for d in at.dataframe if "profile" in d.value.columns)
    return set(table["profile"])


def test_profile_picker_defaults_to_the_gpus_roofline_profile() -> None:
    at = open_page("What-if")
    picker = at.selectbox(key="wi_profile")
    assert picker.value == "default: the GPU's h200-roofline"
    assert "datasheet" in picker.options and "h800-published" in picker.options
    assert "h200-roofline" not in picker.options  # it is the default entry
    at.button(key="wi_run").click().run()
    assert not at.exception
    assert _profiles(at) == {"h200-roofline"}
    picker.set_value("datasheet").run()
    at.button(key="wi_run").click().run()
    assert _profiles(at) == {"h200 datasheet roofline"}
