"""What-if page, "GPUs for a target rate": capacity search of the page's scenario."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest
from app_helpers import array, figures, open_page
from streamlit.testing.v1 import AppTest

from app import capacity_view, charts
from app.pages_.whatif import DEFAULT
from sim.search.capacity import CapacityError
from sim.search.capacity_report import CapacityReport
from sim.specs.scenario import Scenario

TARGET = 50.0
GPUS_COL = f"GPUs for {TARGET:g} req/s"


def _scenario(workload: dict[str, Any]) -> Scenario:
    return Scenario.model_validate(
        {**DEFAULT, "model": "deepseek-v3", "gpu": "h200", "workload": workload}
    )


def _table(at: AppTest) -> pd.DataFrame:
    return next(d.value for d in at.dataframe if "GPUs each" in d.value.columns)


def _probe_figure(at: AppTest, metric: str) -> dict[str, Any]:
    return next(f for f in figures(at) if f["layout"]["title"]["text"].startswith(metric))


def test_default_page_search_shows_gpus_and_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []
    real = capacity_view.search

    def counted(*args: Any, **kwargs: Any) -> CapacityReport:
        calls.append(args[2].target_rate_req_s)
        return real(*args, **kwargs)

    monkeypatch.setattr(capacity_view, "search", counted)
    at = open_page("What-if")
    at.number_input(key="run_duration").set_value(20.0).run()  # probes of 20 s keep this short
    at.number_input(key="run_warmup").set_value(4.0).run()
    assert any("closed-loop" in c.value and "Poisson" in c.value for c in at.caption)
    assert at.number_input(key="wi_cap_start").value == capacity_view.DEFAULT_START_REQ_S
    at.number_input(key="wi_cap_target").set_value(TARGET).run()
    assert any("Press the button" in i.value for i in at.info)
    at.button(key="wi_cap_run").click().run()
    assert not at.exception and not at.error
    assert calls == [TARGET]
    table = _table(at)
    assert table["deployment"].tolist() == ["tp8", "dp8_ep8"]
    assert table["GPUs each"].tolist() == [8, 8]
    assert table["status"].tolist() == ["converged", "converged"]
    for _, row in table.iterrows():
        gpus = row[GPUS_COL]
        assert isinstance(gpus, int | float) and float(gpus).is_integer()
        assert row["replicas"] == math.ceil(TARGET / row["max req/s"])
        assert gpus == row["replicas"] * row["GPUs each"]
        assert row["TPOT p90 ms"] <= DEFAULT["slo"]["tpot_s"] * 1e3
        assert row["TTFT p90 ms"] <= DEFAULT["slo"]["ttft_s"] * 1e3
    tpot = _probe_figure(at, "TPOT p90")
    assert [t["name"] for t in tpot["data"]] == ["tp8", "dp8_ep8"]  # one trace per deployment
    assert tpot["layout"]["xaxis"]["type"] == "log"
    assert tpot["layout"]["shapes"][0]["y0"] == pytest.approx(DEFAULT["slo"]["tpot_s"] * 1e3)
    for trace, (_, row) in zip(tpot["data"], table.iterrows(), strict=True):
        rates = array(trace, "x")
        assert len(rates) == row["runs"] and rates == sorted(rates)
        # the closed loop is searched from the start rate, then doubled (or halved)
        assert 4.0 in rates and (8.0 in rates or 2.0 in rates)
        i = rates.index(pytest.approx(row["max req/s"]))
        symbols = trace["marker"]["symbol"]
        assert symbols[i] == "circle" and symbols[i + 1] == "x"  # met at the max, missed just above
        assert rates[i + 1] / rates[i] <= 1.05
    ttft = _probe_figure(at, "TTFT p90")
    assert ttft["layout"]["shapes"][0]["y0"] == pytest.approx(DEFAULT["slo"]["ttft_s"] * 1e3)
    assert "capacity report JSON" in [b.label for b in at.download_button]
    at.run()  # a re-render shows the kept report without searching again
    at.button(key="wi_cap_run").click().run()  # so does the button for the same inputs
    assert calls == [TARGET] and _table(at)[GPUS_COL].tolist() == table[GPUS_COL].tolist()
    at.number_input(key="wi_cap_tol").set_value(10.0).run()  # other options: not searched yet
    assert not [d for d in at.dataframe if "GPUs each" in d.value.columns]
    assert any("Press the button" in i.value for i in at.info)


def test_open_loop_page_searches_from_its_own_rate() -> None:
    at = open_page("What-if")
    at.radio(key="wl_loop").set_value("open loop (Poisson)").run()
    assert not at.exception
    keys = [n.key for n in at.number_input]
    assert "wi_cap_target" in keys and "wi_cap_start" not in keys  # only a closed loop asks
    assert any("starts from the page's rate, 4 req/s" in c.value for c in at.caption)


def _render_trace() -> None:
    from app import capacity_view
    from app.pages_.whatif import DEFAULT
    from sim.specs.scenario import Scenario

    raw = {**DEFAULT, "model": "deepseek-v3", "gpu": "h200"}
    raw["workload"] = {"kind": "trace", "path": "requests.csv"}
    capacity_view.render(Scenario.model_validate(raw))


def test_trace_workload_says_what_the_search_needs() -> None:
    at = AppTest.from_function(_render_trace, default_timeout=60).run()
    assert not at.exception
    assert "needs Poisson or Gamma arrivals, not a trace workload" in at.info[0].value
    assert not at.button and not at.number_input  # nothing to run


def test_searchable_keeps_lengths_and_cache_hits() -> None:
    closed = _scenario({**DEFAULT["workload"], "prefix_cache_fraction": 0.25})
    searched = capacity_view.searchable(closed, 6.0)
    w = searched.workload
    assert w.kind == "poisson" and w.rate_req_s == 6.0
    assert w.input == closed.workload.input and w.output == closed.workload.output
    assert w.prefix_cache_fraction == 0.25
    assert searched.deployments == closed.deployments and searched.run == closed.run
    lengths = {k: DEFAULT["workload"][k] for k in ("input", "output")}
    gamma = _scenario({**lengths, "kind": "gamma", "rate_req_s": 3.0, "cv": 2.0})
    assert capacity_view.searchable(gamma, 6.0) is gamma  # open loop: searched as it is
    trace = _scenario({"kind": "trace", "path": "requests.csv"})
    with pytest.raises(CapacityError, match="Poisson or Gamma"):
        capacity_view.searchable(trace, 6.0)


def test_report_table_leaves_missing_counts_empty() -> None:
    closed = _scenario(DEFAULT["workload"])
    common = {"gpus_per_deployment": 8, "runs": 2, "probes": [], "note": "n"}
    unmet = {"max_rate_req_s": None, "failing_rate_req_s": 1.0, "output_tok_s_per_gpu": None}
    met = {"max_rate_req_s": 9.5, "failing_rate_req_s": 9.9, "output_tok_s_per_gpu": 400.0}
    report = CapacityReport.model_validate(
        {
            "scenario": "s", "target_rate_req_s": 20.0, "slo": closed.slo, "tolerance": 0.05,
            "max_runs": 2, "duration_s": 20.0,
            "deployments": [
                {**common, **met, "deployment": "a", "status": "converged", "ttft_s": 0.5,
                 "tpot_s": 0.05, "replicas": 3, "gpus": 24},
                {**common, **unmet, "deployment": "b", "status": "fails_at_lowest",
                 "ttft_s": None, "tpot_s": None, "replicas": None, "gpus": None},
            ],
        }
    )  # fmt: skip
    table = capacity_view.report_table(report)
    assert table["GPUs for 20 req/s"].iloc[0] == 24
    assert pd.isna(table["GPUs for 20 req/s"].iloc[1]) and pd.isna(table["replicas"].iloc[1])
    assert table["TPOT p90 ms"].iloc[0] == pytest.approx(50.0)
    assert table["status"].tolist() == ["converged", "fails_at_lowest"]


def test_capacity_probes_chart() -> None:
    fig = charts.capacity_probes(
        {
            "a": [(8.0, 40.0, True), (2.0, 30.0, True), (16.0, 120.0, False)],
            "b": [(4.0, None, True)],
        },
        metric="TPOT p90",
        slo_ms=100.0,
    )
    a, b = fig.data
    assert list(a.x) == [2.0, 8.0, 16.0] and list(a.y) == [30.0, 40.0, 120.0]  # sorted by rate
    assert list(a.marker.symbol) == ["circle", "circle", "x"]
    assert b.name == "b" and list(b.y) == [None]
    assert fig.layout.shapes[0].y0 == 100.0 and fig.layout.xaxis.type == "log"
    assert list(fig.layout.xaxis.tickvals) == [2.0, 3.0, 5.0, 10.0]  # labelled inside one decade
