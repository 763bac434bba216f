"""What-if page: set inputs, run, and read the numbers the page shows."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_helpers import array, error, figures, open_page
from streamlit.testing.v1 import AppTest

from app import components, export
from app.pages_.whatif import DEFAULT
from sim.catalog import CATALOG_DIR
from sim.io.scenario_io import parse_scenario


def _cards(at: AppTest) -> list[tuple[str, str, str]]:
    return [(m.label, m.value, m.delta or "") for m in at.metric]


def _number(value: str) -> float:
    """A card's figure, without its interval (`464 :small[±2.6%]` -> 464)."""
    return float(value.split()[0].replace(",", ""))


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
    deltas = {label: d for label, _, d in cards[6:]}
    assert deltas["out tok/s/GPU"].count("%") == 2  # the change and its paired interval
    assert deltas["KV dup factor"] == ""  # a layout fact: no change in %
    descriptions = [m.proto.delta_description for m in at.metric[6:]]
    assert descriptions[0] == "vs base"  # beside "-25% ±5%"
    assert descriptions[1:] == ["vs baseline"] * 4 + [""]
    tput = [_number(v) for label, v, _ in cards if label == "out tok/s/GPU"]
    assert all(t > 0 for t in tput)
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert titles[0] == "Per-GPU memory"
    assert "TTFT distribution" in titles
    assert "Mean step time by op [time source]" in titles
    breakdown = next(f for f in figures(at) if f["layout"]["title"]["text"].startswith("Mean step"))
    *ops, launches = breakdown["data"]  # the roofline profile's ops, their launches on top
    assert all(t["name"].endswith("[roofline]") for t in ops)
    assert launches["name"] == "kernel_launch [published]"
    cdf = next(f for f in figures(at) if f["layout"]["title"]["text"] == "TTFT distribution")
    assert [t["name"] for t in cdf["data"]] == ["tp8", "dp8_ep8"]
    assert all(array(t, "y")[-1] == pytest.approx(1.0) for t in cdf["data"])
    assert [b.label for b in at.download_button][-2:] == ["results JSON", "results CSV"]
    captions = " ".join(c.value for c in at.caption)
    assert "Why this default can rank the layouts otherwise" in captions
    assert "Every op time here is a roofline estimate (h200-roofline)" in captions
    details = next(d.value for d in at.dataframe if "step ms" in d.value.columns)
    step = details["step ms"].tolist()
    assert step == [round(s, 1) for s in step] and all(10 < s < 1000 for s in step)  # ms, 0.1
    assert all(0 < u <= 100 for u in details["KV util %"])  # in %, not a fraction
    mem = figures(at)[0]
    assert "10^9 bytes" in mem["layout"]["xaxis"]["title"]["text"]
    assert "GiB of HBM, 135.7 GB usable" in mem["layout"]["xaxis"]["title"]["text"]
    at.segmented_control(key="wi_cdf_metric").set_value("TPOT").run()
    tpot = next(f for f in figures(at) if f["layout"]["title"]["text"] == "TPOT distribution")
    p90 = [_number(v) for label, v, _ in _cards(at) if label == "TPOT p90 ms"]  # ms, as drawn
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
    at.number_input(key="wl_out_tokens").set_value(1000).run()
    at.button(key="wi_run").click().run()
    assert not at.exception and not at.error
    dup = [m.value for m in at.metric if m.label == "KV dup factor"]
    assert dup == ["4", "1"]
    assert not any("Why this default" in c.value for c in at.caption)  # not the default traffic
    heads = [m.value for m in at.markdown if "GPUs" in m.value]
    assert heads[0] == "**tp8** · attn TP4 x DP2, MoE EP1 x TP8 · 8 GPUs · baseline"
    scenario = parse_scenario(exported[-1])  # what `mlasim run` would read
    assert [(d.name, d.attn_tp) for d in scenario.deployments] == [("tp8", 4), ("dp8_ep8", 1)]
    assert scenario.workload.kind == "closed"
    caption = next(c.value for c in at.caption if c.value.startswith("scenario "))
    assert "deployments from the cache" in caption


def test_invalid_deployment_is_reported_not_raised() -> None:
    at = open_page("What-if")
    at.number_input(key="dep0.attn_tp").set_value(3).run()
    assert not at.exception
    message = error(at)
    assert "Deployment 1 is invalid" in message and "attn_tp=3 must divide" in message
    assert not at.metric and not at.button  # nothing to run until it is fixed
    at.number_input(key="dep0.attn_tp").set_value(8).run()
    assert not at.error


def test_scenario_level_errors_name_the_field() -> None:
    at = open_page("What-if")
    at.text_input(key="dep1.name").set_value("dp 8").run()
    assert "not a valid identifier" in error(at)
    at.text_input(key="dep1.name").set_value("dp8").run()
    at.number_input(key="dep1.mtp_draft_tokens").set_value(2).run()
    assert "mtp_acceptance has 0 values for mtp_draft_tokens=2" in error(at)
    assert "e.g. 0.85" in at.text_input(key="dep1.mtp_acceptance").placeholder  # a hint only
    at.text_input(key="dep1.mtp_acceptance").set_value("0.8, lots").run()
    assert "mtp_acceptance" in error(at)
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
    table = next(d.value for d in at.dataframe if "goodput req/s" in d.value.columns)
    assert list(table.columns) == [
        "deployment", "concurrency", "out tok/s/GPU", "TPOT p90 ms", "goodput req/s", "SLO met"
    ]  # fmt: skip
    tpot = table["TPOT p90 ms"].dropna()  # empty where no request completed
    assert len(tpot) > 0 and (tpot > 1).all()  # in ms, as the cards
    assert set(table["SLO met"]) <= {"yes", "no"}
    slow = table["TPOT p90 ms"] > 1e3 * DEFAULT["slo"]["tpot_s"]
    assert (table.loc[slow, "SLO met"] == "no").all()  # a TPOT past the target fails the SLO
    at.run()  # another interaction: the sweep stays, without being run again
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert "Throughput vs offered load" in titles
    at.number_input(key="run_seed").set_value(2).run()  # another scenario: not its sweep
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert "Throughput vs offered load" not in titles


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
    assert "is not a usable model config" in error(at)


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
