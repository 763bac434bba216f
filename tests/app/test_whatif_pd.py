"""What-if page with a PD pair: the card's pool forms, results, memory bars, YAML and capacity."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest
from app_helpers import error, figures, open_page
from streamlit.testing.v1 import AppTest

from app import capacity_view, export, pd_capacity_view
from sim.io.scenario_io import parse_scenario
from sim.search.capacity_report import CapacityReport
from sim.specs.deployment import Deployment, PdDeployment

TARGET = 50.0


def _pd_page() -> AppTest:
    """The page with card 2 switched to a PD pair named 'pd'."""
    at = open_page("What-if")
    at.radio(key="dep1.layout").set_value("PD pair").run()
    at.text_input(key="dep1.pd.name").set_value("pd").run()
    assert not at.exception and not at.error
    return at


def _memory_table(at: AppTest) -> pd.DataFrame:
    return next(d.value for d in at.dataframe if "KV dup factor" in d.value.columns)


def test_pd_pair_runs_shows_pools_and_exports(monkeypatch: pytest.MonkeyPatch) -> None:
    exported: list[str] = []
    real = export.scenario_yaml
    monkeypatch.setattr(
        export, "scenario_yaml", lambda sc: exported.append(real(sc)) or exported[-1]
    )
    at = _pd_page()
    at.number_input(key="dep1.decode.replicas").set_value(2).run()
    at.selectbox(key="dep1.decode.kv_dtype").set_value("fp8").run()
    at.number_input(key="dep1.pd.kv_transfer_gb_s").set_value(100.0).run()
    assert not at.exception and not at.error

    mem = _memory_table(at)  # one bar and row per pool, before anything is simulated
    assert mem["deployment"].tolist() == ["tp8", "pd.prefill", "pd.decode"]
    assert mem["KV dup factor"].tolist() == [8, 1, 1]
    per_token = mem["KV bytes/token/GPU"].tolist()
    assert per_token[2] < 0.6 * per_token[1]  # the decode pool's FP8 cache against BF16
    bars = figures(at)[0]
    assert bars["layout"]["title"]["text"] == "Per-GPU memory"
    assert all(t["y"] == ["tp8", "pd.prefill", "pd.decode"] for t in bars["data"])

    scenario = parse_scenario(exported[-1])  # what `mlasim run` would read
    pair = scenario.deployments[1]
    assert isinstance(pair, PdDeployment) and isinstance(scenario.deployments[0], Deployment)
    assert pair.name == "pd" and pair.kv_transfer_gb_s == 100.0
    assert (pair.prefill.kv_dtype, pair.decode.kv_dtype) == ("bf16", "fp8")
    assert (pair.prefill.replicas, pair.decode.replicas) == (1, 2)
    assert pair.prefill.moe_ep == pair.decode.moe_ep == 8  # both pools start as card 2's DP8 EP8
    assert pair.total_gpus == 24

    at.button(key="wi_run").click().run()
    assert not at.exception and not at.error
    heads = [m.value for m in at.markdown if "GPUs" in m.value]
    assert heads == [
        "**tp8** · attn TP8 x DP1, MoE EP1 x TP8 · 8 GPUs · baseline",
        "**pd** · P: attn TP1 x DP8, MoE EP8 | D: attn TP1 x DP8, MoE EP8 x2 · 24 GPUs "
        "(prefill 8 + decode 16) · KV cards: decode pool",
    ]
    details = next(d.value for d in at.dataframe if "step ms" in d.value.columns)
    assert details["deployment"].tolist() == ["tp8", "pd"]
    assert details["GPUs"].tolist() == [8, 24]
    cards = [(m.label, m.value) for m in at.metric]
    assert len(cards) == 12
    tput = [  # "464 :small[±2.6%]": the figure, then its interval
        float(v.split()[0].replace(",", "")) for label, v in cards if label == "out tok/s/GPU"
    ]
    assert all(t > 0 for t in tput)
    assert [v for label, v in cards if label == "KV dup factor"] == ["8", "1"]  # decode pool's
    # 8 GPUs against 24 (16 holding the KV): goodput and KV change per GPU
    deltas = {m.label: m.delta for m in at.metric[6:]}
    assert deltas["goodput req/s"].endswith("per GPU")
    assert deltas["KV tokens (distinct)"].endswith("per GPU")


def test_invalid_pool_input_is_reported_not_raised() -> None:
    at = _pd_page()
    at.number_input(key="dep1.prefill.attn_tp").set_value(3).run()
    assert not at.exception
    message = error(at)
    assert "Deployment 2 is invalid" in message
    assert "prefill" in message and "attn_tp=3 must divide" in message
    assert not at.metric and not at.button  # nothing to run until it is fixed
    at.number_input(key="dep1.prefill.attn_tp").set_value(8).run()
    assert not at.error
    at.selectbox(key="dep1.decode.dsa").set_value("on").run()  # checked against the model
    assert not at.exception
    assert "deployments[1] (pd).decode.dsa='on' but deepseek-v3 has no DSA" in error(at)
    at.selectbox(key="dep1.decode.dsa").set_value("auto").run()
    at.text_input(key="dep1.pd.name").set_value("p d").run()
    assert "not a valid identifier" in error(at)
    at.text_input(key="dep1.pd.name").set_value("pd").run()
    assert not at.error and not at.exception


def test_back_to_one_unit() -> None:
    at = _pd_page()
    assert _memory_table(at)["deployment"].tolist() == ["tp8", "pd.prefill", "pd.decode"]
    at.radio(key="dep1.layout").set_value("one unit").run()
    assert not at.exception and not at.error
    assert _memory_table(at)["deployment"].tolist() == ["tp8", "dp8_ep8"]


def test_capacity_search_sizes_pd_pools(monkeypatch: pytest.MonkeyPatch) -> None:
    reports: list[CapacityReport] = []
    real = capacity_view.search

    def kept(*args: Any, **kwargs: Any) -> CapacityReport:
        reports.append(real(*args, **kwargs))
        return reports[-1]

    monkeypatch.setattr(capacity_view, "search", kept)
    at = _pd_page()
    at.number_input(key="run_duration").set_value(10.0).run()  # short probes, few of them
    at.number_input(key="run_warmup").set_value(2.0).run()
    at.number_input(key="wi_cap_runs").set_value(3).run()
    at.number_input(key="wi_cap_target").set_value(TARGET).run()
    at.button(key="wi_cap_run").click().run()
    assert not at.exception and not at.error
    (report,) = reports
    assert [p.deployment for p in report.pd_pools] == ["pd"]  # in the JSON download too
    whole = next(d.value for d in at.dataframe if "GPUs each" in d.value.columns)
    table = next(d.value for d in at.dataframe if "prefill : decode GPUs" in d.value.columns)
    assert table["deployment"].tolist() == ["pd"]
    row = table.iloc[0]
    for pool in ("prefill", "decode"):
        assert row[f"{pool} GPUs each unit"] == 8
        assert row[f"{pool} units"] == math.ceil(TARGET / row[f"{pool} max req/s"])
        assert row[f"{pool} GPUs"] == row[f"{pool} units"] * 8
    assert row["GPUs (pools sized apart)"] == row["prefill GPUs"] + row["decode GPUs"]
    pair_gpus = whole.loc[whole["deployment"] == "pd", f"GPUs for {TARGET:g} req/s"].item()
    assert row["GPUs (whole pairs)"] == pair_gpus
    assert row["prefill : decode GPUs"] == pd_capacity_view.ratio(
        int(row["prefill GPUs"]), int(row["decode GPUs"])
    )
    assert row["KV transfer ms"] > 0
    assert row["prefill TTFT budget ms"] + row["KV transfer ms"] == pytest.approx(3000.0)
    assert row["runs"] == report.pd_pools[0].prefill.runs + report.pd_pools[0].decode.runs
    assert any(c.value.startswith("pd.prefill: ") for c in at.caption)  # each pool's note
    runs = next(c.value for c in at.caption if " simulations of " in c.value)
    assert runs.startswith(f"{sum(d.runs for d in report.deployments) + row['runs']} ")


def test_pools_table_without_counts() -> None:
    assert pd_capacity_view.ratio(8, 16) == "1 : 2"
    assert pd_capacity_view.ratio(24, 16) == "3 : 2"
    assert pd_capacity_view.ratio(None, 16) is None
    common = {"runs": 2, "probes": [], "note": "n", "failing_rate_req_s": 1.0}
    none = {"max_rate_req_s": None, "output_tok_s_per_gpu": None, "ttft_s": None, "tpot_s": None,
            "replicas": None, "gpus": None, "status": "fails_at_lowest"}  # fmt: skip
    met = {"max_rate_req_s": 4.0, "output_tok_s_per_gpu": 100.0, "ttft_s": 0.5, "tpot_s": 0.02,
           "replicas": 5, "gpus": 40, "status": "converged"}  # fmt: skip
    report = CapacityReport.model_validate(
        {
            "scenario": "s", "target_rate_req_s": 20.0, "tolerance": 0.05, "max_runs": 2,
            "slo": {"ttft_s": 2.0, "tpot_s": 0.05}, "duration_s": 10.0,
            "deployments": [{**common, **none, "deployment": "pd", "gpus_per_deployment": 16}],
            "pd_pools": [{
                "deployment": "pd", "kv_transfer_s": 0.01, "prefill_ttft_budget_s": 1.99,
                "prefill": {**common, **none, "deployment": "pd.prefill",
                            "gpus_per_deployment": 8},
                "decode": {**common, **met, "deployment": "pd.decode", "gpus_per_deployment": 8},
                "gpus": None,
            }],
        }
    )  # fmt: skip
    row = pd_capacity_view.pools_table(report).iloc[0]
    assert pd.isna(row["prefill units"]) and pd.isna(row["prefill GPUs"])
    assert row["decode units"] == 5 and row["decode GPUs"] == 40
    assert row["prefill : decode GPUs"] is None and pd.isna(row["GPUs (pools sized apart)"])
    assert row["decode TPOT p90 ms"] == pytest.approx(20.0)
    assert row["status"] == "fails_at_lowest / converged"
    assert pd_capacity_view.pools_table(report.model_copy(update={"pd_pools": []})).empty
