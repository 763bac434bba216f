"""Scenarios page: open a study, edit it, run it, check its expectations, download it."""

from __future__ import annotations

from pathlib import Path

from app_helpers import error, open_page
from streamlit.testing.v1 import AppTest

from app.pages_ import scenarios
from sim.io.scenario_io import load_scenario

DEFAULT = Path(scenarios.SCENARIOS) / "default.yaml"
SHORT_RUN = "run: {duration_s: 12, warmup_s: 2, seed: 1}"


def _edited(at: AppTest, old: str, new: str) -> AppTest:
    box = at.text_area(key="sc_text_default.yaml")
    assert old in box.value
    return box.set_value(box.value.replace(old, new)).run()


def _run_line() -> str:
    return next(ln for ln in DEFAULT.read_text().splitlines() if ln.startswith("run:"))


def test_lists_the_project_scenarios() -> None:
    files = [p.name for p in scenarios.scenario_files()]
    assert "default.yaml" in files
    for p in scenarios.scenario_files():
        assert load_scenario(p).deployments  # every listed file is a loadable scenario


def test_open_edit_run_and_check() -> None:
    at = open_page("Scenarios")
    assert at.selectbox(key="sc_file").value == "default.yaml"
    summary = next(c.value for c in at.caption if c.value.startswith("**default**"))
    assert "deepseek-v3 on h200" in summary and "tp8, dp8_ep8" in summary
    at = _edited(at, _run_line(), SHORT_RUN)
    at.button(key="sc_run").click().run()
    assert not at.exception and not at.error
    dup = [m.value for m in at.metric if m.label == "KV dup factor"]
    assert dup == ["8", "1"]
    # 12 s is far shorter than an answer: the page says the figures rest on few requests
    assert any("few requests that arrived in the window finished" in w.value for w in at.warning)
    checks = next(d.value for d in at.dataframe if "expectation" in d.value.columns)
    rows = dict(zip(checks["expectation"], checks["ok"], strict=True))
    assert rows["tp8.kv_dup_factor == 8"] and rows["dp8_ep8.kv_dup_factor == 1"]
    assert any(h.value.startswith("Expectations:") for h in at.subheader)
    labels = [b.label for b in at.download_button]
    assert labels == ["download this YAML", "results JSON", "results CSV"]


def test_invalid_edit_names_line_and_field() -> None:
    at = open_page("Scenarios")
    at = _edited(at, "attn_tp: 1 ", "attn_tp: 3 ")
    assert not at.exception
    message = error(at)
    line = 1 + next(
        i for i, ln in enumerate(DEFAULT.read_text().splitlines()) if "attn_tp: 1 " in ln
    )
    assert f"line {line}: deployments[1].attn_tp" in message and "attn_tp=3" in message
    assert not at.button  # nothing runs until the file loads
    at = _edited(at, "attn_tp: 3 ", "attn_tp: 1 ")
    assert not at.error


def test_broken_yaml_is_reported() -> None:
    at = open_page("Scenarios")
    at = _edited(at, "gpu: h200", "gpu: [h200")
    assert not at.exception
    assert "does not load" in error(at) and "(yaml)" in error(at)


def test_expectation_rows_verdicts() -> None:
    from sim.io.scenario_io import parse_scenario
    from sim.run import run_scenario

    text = DEFAULT.read_text().replace(_run_line(), SHORT_RUN)
    results = run_scenario(parse_scenario(text, DEFAULT))
    rows = scenarios.expectation_rows(text + "  - tp8.gpus == 9\n", results)
    verdicts = {r["expectation"]: r["ok"] for r in rows}
    assert verdicts["tp8.kv_dup_factor == 8"] is True
    assert verdicts["tp8.gpus == 9"] is False
    failed = next(r for r in rows if r["expectation"] == "tp8.gpus == 9")
    assert "8" in failed["detail"]
