"""`mlasim sweep` and `mlasim capacity` through Typer: tables, files, and exit code 2 with a
message on bad input."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from sim.cli import app
from tests.builders import TINY

RUNNER = CliRunner(env={"COLUMNS": "200"})


def _scenario(tmp_path: Path, **changes: object) -> Path:
    p = tmp_path / "tiny.yaml"
    p.write_text(yaml.safe_dump(TINY | changes, sort_keys=False))
    return p


def test_sweep_table_csv_and_json(tmp_path: Path) -> None:
    sc, out_csv, out_json = _scenario(tmp_path), tmp_path / "s.csv", tmp_path / "s.json"
    res = RUNNER.invoke(
        app,
        ["sweep", str(sc), "--set", "workload.rate_req_s=2,6", "--set", "run.duration_s=5",
         "--backend", "serial", "--csv", str(out_csv), "--json", str(out_json)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "workload.rate_req_s" in res.output and "TTFT p90 ms" in res.output
    assert "run.duration_s" not in res.output.split("┃", 1)[1]  # fixed values are not columns
    with out_csv.open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["point"], r["workload.rate_req_s"], r["deployment"]) for r in rows] == [
        ("0", "2", "tp8"), ("0", "2", "dp8_ep8"), ("1", "6", "tp8"), ("1", "6", "dp8_ep8"),
    ]  # fmt: skip
    for col in ("run.duration_s", "output_tok_s_per_gpu", "ttft_s.p90", "tpot_s.p90",
                "goodput_req_s", "slo_met", "requests.completed"):  # fmt: skip
        assert col in rows[0]
    data = json.loads(out_json.read_text())
    assert [r["deployment"] for r in data] == [r["deployment"] for r in rows]
    assert data[3]["output_tok_s_per_gpu"] == float(rows[3]["output_tok_s_per_gpu"])


def test_sweep_usage_errors_exit_2(tmp_path: Path) -> None:
    sc = _scenario(tmp_path)
    cases = [
        (["--set", "workload.rate=1,2"], "known keys are"),
        (["--set", "deployments.*.kv_dtype=fp9"], "'bf16' or 'fp8'"),
        (["--set", "workload.rate_req_s="], "no values"),
        (["--backend", "dask"], "known backends are process, serial, ray"),
    ]
    for args, message in cases:
        res = RUNNER.invoke(app, ["sweep", str(sc), *args])
        assert res.exit_code == 2, (args, res.output)
        assert message in " ".join(res.output.split()), res.output
    res = RUNNER.invoke(app, ["sweep", str(tmp_path / "missing.yaml")])
    assert res.exit_code == 2 and "no such scenario file" in res.output


def test_capacity_table_and_json(tmp_path: Path) -> None:
    sc = _scenario(tmp_path, deployments=[TINY["deployments"][1]])
    out = tmp_path / "c.json"
    res = RUNNER.invoke(
        app,
        ["capacity", str(sc), "--target-rate", "100", "--tolerance", "0.1", "--backend",
         "serial", "--set", "workload.rate_req_s=20", "--json", str(out)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    (d,) = report["deployments"]
    assert d["status"] == "converged" and d["gpus"] == d["replicas"] * 8
    line = next(x for x in res.output.splitlines() if "dp8_ep8" in x and "converged" in x)
    assert f"{d['max_rate_req_s']:.4g}" in line and f" {d['gpus']} " in line


def test_capacity_refuses_closed_loop_and_missing_ray(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as on a machine without Ray: import fails
    closed = {k: v for k, v in TINY["workload"].items() if k != "rate_req_s"}
    sc = _scenario(tmp_path, workload=closed | {"kind": "closed", "concurrency": 4})
    res = RUNNER.invoke(app, ["capacity", str(sc), "--target-rate", "10"])
    assert res.exit_code == 2 and "poisson or gamma" in res.output
    res = RUNNER.invoke(app, ["capacity", str(_scenario(tmp_path)), "--target-rate", "10",
                              "--backend", "ray"])  # fmt: skip
    assert res.exit_code == 2
    assert "pip install 'mlasim[dist]'" in " ".join(res.output.split())


def test_run_takes_the_same_overrides(tmp_path: Path) -> None:
    sc, out = _scenario(tmp_path), tmp_path / "r.json"
    args = ["run", str(sc), "--set", "deployments.tp8.kv_dtype=fp8", "--set", "run.duration_s=4"]
    res = RUNNER.invoke(app, [*args, "--json", str(out)])
    assert res.exit_code == 0, res.output
    results = json.loads(out.read_text())
    assert results["end_s"] == 4.0
    bytes_per_token = {d["name"]: d["kv_bytes_per_token_per_gpu"] for d in results["deployments"]}
    assert bytes_per_token["tp8"] < bytes_per_token["dp8_ep8"]  # FP8 KV on tp8 only
    bad = RUNNER.invoke(app, ["run", str(sc), "--set", "deployments.tp9.kv_dtype=fp8"])
    assert bad.exit_code == 2 and "known names are tp8, dp8_ep8" in " ".join(bad.output.split())


def _said(res: Any) -> str:
    """The output as one line; the command must have ended with a message, not an exception."""
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return " ".join(res.output.split())


def test_bad_profile_is_a_message_with_exit_code_2(tmp_path: Path) -> None:
    sc = _scenario(tmp_path, profile="h900-measured")
    for cmd in (["sweep", "--backend", "serial"], ["capacity", "--target-rate", "10"]):
        res = RUNNER.invoke(app, [cmd[0], str(sc), *cmd[1:]])
        out = _said(res)
        line = next(i for i, t in enumerate(sc.read_text().splitlines(), 1) if "profile" in t)
        assert res.exit_code == 2
        assert f"{sc}:{line}: profile: unknown profile 'h900-measured'" in out
    sc = _scenario(tmp_path)
    res = RUNNER.invoke(app, ["sweep", str(sc), "--set", "profile=h900,h200-roofline"])
    out = _said(res)
    assert res.exit_code == 2 and f"{sc}: --set: point 0 (profile=h900): profile: unknown" in out
    res = RUNNER.invoke(app, ["capacity", str(sc), "--target-rate", "10", "--set", "profile=h9"])
    assert res.exit_code == 2 and f"{sc}: profile: unknown profile 'h9'" in _said(res)


def test_worker_errors_come_back_as_messages(tmp_path: Path) -> None:
    sc = _scenario(tmp_path)
    tight = ["--set", "deployments.dp8_ep8.mem_fraction=0.3", "--backend", "process", "--jobs", "1"]
    res = RUNNER.invoke(app, ["sweep", str(sc), *tight])
    assert res.exit_code == 2  # the one point fails: nothing ran
    assert f"{sc}: deployment 'dp8_ep8' does not fit on h200" in _said(res)
    # capacity searches each deployment alone: the one that does not fit is a row with its
    # reason, the other is searched
    journal = ["--journal", str(tmp_path / "c.jsonl"), "--max-runs", "2"]
    res = RUNNER.invoke(app, ["capacity", str(sc), "--target-rate", "10", *tight, *journal])
    out = _said(res)
    assert res.exit_code == 0, out
    assert "dp8_ep8: the probe at 4 req/s failed: deployment 'dp8_ep8' does not fit on h200" in out
    assert any(x.startswith("│ tp8") and "error" not in x for x in res.output.splitlines())
    alone = json.dumps([TINY["deployments"][1] | {"mem_fraction": 0.3}])
    res = RUNNER.invoke(app, ["capacity", str(sc), "--target-rate", "10", "--set",
                              f"deployments={alone}", *tight[2:], *journal])  # fmt: skip
    assert res.exit_code == 2  # every deployment failed: the inputs are wrong, as in `run`
    assert f"{sc}: deployment 'dp8_ep8' does not fit on h200" in _said(res)


def test_outputs_in_a_missing_folder_are_refused(tmp_path: Path) -> None:
    sc, out = _scenario(tmp_path), tmp_path / "no" / "c.json"
    for cmd in (
        ["sweep", "--csv", str(out)],
        ["capacity", "--target-rate", "10", "--json", str(out)],
    ):
        res = RUNNER.invoke(app, [cmd[0], str(sc), *cmd[1:]])
        assert res.exit_code == 2 and f"{out}: the folder" in _said(res)
