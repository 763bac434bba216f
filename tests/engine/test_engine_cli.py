"""`mlasim run` and `mlasim schema` through Typer, with the real cost model on a short run."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from sim.cli_run import register
from sim.io.scenario_io import load_scenario

ROOT = Path(__file__).resolve().parents[2]
SHORT = """\
name: short
model: deepseek-v3
gpu: h200
deployments:
  - {name: tp8, attn_tp: 8, moe_tp: 8}
  - {name: dp8_ep8, attn_tp: 1, moe_ep: 8}
workload:
  kind: poisson
  rate_req_s: 4
  input: {kind: fixed, tokens: 1000}
  output: {kind: fixed, tokens: 50}
slo: {ttft_s: 2, tpot_s: 0.1}
run: {duration_s: 6, warmup_s: 1, seed: 1}
"""


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def test_run_prints_reasons_and_writes_files(tmp_path: Path) -> None:
    sc = tmp_path / "short.yaml"
    sc.write_text(SHORT)
    out = tmp_path / "r.json"
    res = CliRunner(env={"COLUMNS": "200"}).invoke(
        _app(), ["run", str(sc), "--json", str(out), "--csv", str(tmp_path / "r.csv"),
                 "--trace", str(tmp_path / "t.json")], terminal_width=200,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    for label in ("KV dup factor", "KV capacity tokens / GPU", "decode batch / rank",
                  "output tok/s / GPU", "TTFT ms p50/p90/p99", "step time by op"):  # fmt: skip
        assert label in res.output
    data = json.loads(out.read_text())
    dup = {d["name"]: d["kv_dup_factor"] for d in data["deployments"]}
    assert dup == {"tp8": 8, "dp8_ep8": 1}
    assert all(d["step_sources"] for d in data["deployments"])
    assert (tmp_path / "r.csv").exists() and (tmp_path / "t.json").exists()


def test_run_reports_scenario_errors_with_exit_code_2(tmp_path: Path) -> None:
    sc = tmp_path / "bad.yaml"
    sc.write_text(SHORT.replace("attn_tp: 8,", "attn_tpp: 8,"))
    res = CliRunner(env={"COLUMNS": "300"}).invoke(_app(), ["run", str(sc)])
    assert res.exit_code == 2
    assert "bad.yaml:5: deployments[0].attn_tpp: unknown field" in res.output.replace("\n", "")


def test_schema_is_json_with_every_top_level_field() -> None:
    res = CliRunner().invoke(_app(), ["schema"])
    assert res.exit_code == 0
    schema = json.loads(res.output)
    assert {"name", "model", "gpu", "deployments", "workload", "slo", "run"} <= set(
        schema["properties"]
    )


def test_bundled_default_scenario_loads() -> None:
    s = load_scenario(ROOT / "scenarios" / "default.yaml")
    assert [d.name for d in s.deployments] == ["tp8", "dp8_ep8"]
