"""`mlasim plan` from a plan file, and the small CLI fixes found with it: `gpus` shows the links,
`run` shows tok/s per node and plain progress lines when its output is not a terminal."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import yaml
from typer.testing import CliRunner

from sim.cli import app
from sim.plan.launch import FLAGS_FILE
from tests.plan.plan_helpers import TINY

RUNNER = CliRunner()


def test_plan_from_a_plan_block_prints_top_k_cost_and_commands(tmp_path: Path) -> None:
    plan = {k: v for k, v in TINY.items() if k not in ("model", "gpus", "input", "output", "slo")}
    doc = {
        "model": "deepseek-v3", "gpu": "h200",
        "workload": {"input": TINY["input"], "output": TINY["output"]},
        "slo": TINY["slo"], "plan": plan,
    }  # fmt: skip
    f = tmp_path / "plan.yaml"
    f.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    res = RUNNER.invoke(app, ["plan", "--scenario", str(f), "--out", str(out), "--jobs", "1",
                              "--backend", "serial"])  # fmt: skip
    assert res.exit_code == 0, res.output
    text = res.output
    assert "GPUs" in text and "$/hour" in text and "verdict:" in text
    assert "GPUs for 6 req/s:" in text
    assert (out / "pareto.html").read_text().count("Pareto frontier") >= 1
    stored = json.loads(FLAGS_FILE.read_text())
    lines = [ln for ln in text.splitlines() if ln.startswith(("python -m sglang", "vllm serve"))]
    assert any(ln.startswith("python -m sglang") for ln in lines)
    assert any(ln.startswith("vllm serve") for ln in lines)
    for ln in lines:
        engine = "sglang" if ln.startswith("python") else "vllm"
        flags = [w for w in shlex.split(ln) if w.startswith("--")]
        assert set(flags) <= set(stored[engine]["flags"]), ln
    saved = json.loads((out / "plan.json").read_text())
    assert saved["top"] and saved["removed"].keys() == {"layout", "memory", "latency floor",
                                                       "max GPUs", "dominated"}  # fmt: skip
    assert "listed with their reasons in plan.json" in text
    # the plan as a scenario: its top rows with all their copies at the whole target rate
    scenario = out / "scenario.yaml"
    assert f"wrote {scenario}" in " ".join(text.split())
    data = yaml.safe_load(scenario.read_text())
    best = saved["top"][0]
    assert data["deployments"][0]["name"].startswith("top1_")
    assert data["workload"]["rate_req_s"] == TINY["rate_req_s"]
    assert data["slo"]["tpot_s"] == TINY["slo"]["tpot_s"]
    one = {**data, "deployments": data["deployments"][:1]}
    scenario.write_text(yaml.safe_dump(one))  # only the choice: keep the test short
    ran = RUNNER.invoke(app, ["run", str(scenario), "--json", str(tmp_path / "r.json")])
    assert ran.exit_code == 0, ran.output
    (d,) = json.loads((tmp_path / "r.json").read_text())["deployments"]
    assert d["gpus"] == best["gpus"] and d["slo_met"], d


def test_plan_names_what_is_missing() -> None:
    res = RUNNER.invoke(app, ["plan", "--model", "deepseek-v3", "--gpu", "h200"])
    assert res.exit_code == 2
    assert "--isl" in res.output and "--osl" in res.output


def test_gpus_shows_nvlink_and_nic_bandwidth() -> None:
    res = RUNNER.invoke(app, ["gpus", "--json"])
    rows = {r["name"]: r for r in json.loads(res.output)}
    assert rows["h200"]["nvlink_gb_s"] == 450 and rows["h200"]["nic_gb_s"] == 50
    assert rows["h800"]["nvlink_gb_s"] == 160


def test_run_shows_tok_s_per_node_and_plain_progress(tmp_path: Path) -> None:
    sc = Path(__file__).resolve().parents[2] / "scenarios" / "default.yaml"
    res = RUNNER.invoke(
        app, ["run", str(sc), "--set", "run.duration_s=20", "--set", "run.warmup_s=5"]
    )
    assert res.exit_code == 0, res.output
    assert "output tok/s / node" in res.output
    assert "run: tp8 100%" in res.output  # CliRunner mixes stderr in; not a terminal
