"""The check runner on plain Results dicts: expectations, goldens, errors with file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from sim.checks.golden import golden_path
from sim.checks.runner import CheckReport, check_paths, discover
from sim.cli.check import render
from sim.io.yaml_where import yaml_line


def fake_runner(path: Path, text: str) -> dict[str, Any]:
    """Stands in for the simulator: throughput falls with attention TP, KV is duplicated by it."""
    scenario = yaml.safe_load(text)
    deps = []
    for d in scenario["deployments"]:
        tp = int(d.get("attn_tp", 1))
        deps.append(
            {
                "name": d["name"],
                "gpus": 8,
                "output_tok_s_per_gpu": 1000.0 / tp,
                "kv_dup_factor": tp,
                "tpot_s": {"mean": 0.03 * tp, "p50": 0.03 * tp, "p90": 0.04 * tp, "p99": 0.05},
            }
        )
    return {"scenario": scenario.get("name", path.stem), "deployments": deps}


SCENARIO = """\
name: demo
model: deepseek-v3
deployments:
  - {name: dp-ep, attn_tp: 1}
  - {name: tp, attn_tp: 8}
probes:
  decode_8k: {kind: mla_path, model: deepseek-v3, policy: sglang, new_tokens: 1, kv_tokens: 8192}
expect:
  - dp_ep.output_tok_s_per_gpu > 4 * tp.output_tok_s_per_gpu
  - tp.kv_dup_factor == 8
  - decode_8k.absorb
golden:
  rel_tol: 0.02
  metrics: [output_tok_s_per_gpu, tpot_s.p90, kv_dup_factor]
"""


def _write(tmp_path: Path, text: str, name: str = "demo.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _run(*paths: Path, **kw: Any) -> CheckReport:
    return check_paths(list(paths), jobs=1, runner=fake_runner, **kw)


def _text(report: CheckReport, verbose: bool = False) -> str:
    console = Console(record=True, width=220)
    render(report, console, verbose=verbose)
    return console.export_text()


def test_missing_golden_fails_then_update_writes_it(tmp_path: Path) -> None:
    path = _write(tmp_path, SCENARIO)
    first = _run(path)
    assert not first.ok
    assert first.scenarios[0].count("expect") == (3, 3)
    assert "--update-golden" in _text(first)

    updated = _run(path, update_golden=True)
    assert updated.ok and updated.updated == (golden_path(path),)
    stored = json.loads(golden_path(path).read_text())
    assert stored["values"]["tp.output_tok_s_per_gpu"] == 125.0
    assert stored["values"]["dp_ep.kv_dup_factor"] == 1
    assert set(stored["values"]) == {
        f"{d}.{m}"
        for d in ("dp_ep", "tp")
        for m in ("output_tok_s_per_gpu", "tpot_s.p90", "kv_dup_factor")
    }
    again = _run(path)
    assert again.ok and again.scenarios[0].count("golden") == (6, 6)
    assert "all 1 scenarios passed" in _text(again)


def test_golden_drift_beyond_tolerance_shows_both_values(tmp_path: Path) -> None:
    path = _write(tmp_path, SCENARIO)
    _run(path, update_golden=True)
    changed = SCENARIO.replace("attn_tp: 8", "attn_tp: 4").replace("== 8", "== 4")
    path.write_text(changed.replace("> 4 *", "> 3 *"))
    report = _run(path)
    bad = {r.label: r for r in report.scenarios[0].rows if not r.ok}
    assert set(bad) == {"tp.output_tok_s_per_gpu", "tp.tpot_s.p90", "tp.kv_dup_factor"}
    row = bad["tp.output_tok_s_per_gpu"]
    assert (row.actual, row.expected) == ("250", "125")
    assert "+100.00%" in row.detail and "tolerance 2%" in row.detail
    assert "1 of 1 scenarios failed" in _text(report)


def test_failing_expectation_is_explained(tmp_path: Path) -> None:
    path = _write(tmp_path, SCENARIO.replace("> 4 *", "> 10 *"))
    report = _run(path, update_golden=True)
    assert not report.ok and report.updated == ()  # no golden for a scenario that fails
    (row,) = [r for r in report.scenarios[0].rows if not r.ok]
    assert (row.actual, row.expected) == ("1000", "1250")
    assert row.detail == ("dp_ep.output_tok_s_per_gpu (1000) > 10 * tp.output_tok_s_per_gpu (125)")
    out = _text(report)
    assert "FAIL" in out and "dp_ep.output_tok_s_per_gpu (1000)" in out


def test_unknown_name_lists_available(tmp_path: Path) -> None:
    path = _write(tmp_path, SCENARIO.replace("tp.kv_dup_factor == 8", "tp.kv_dupe == 8"))
    rows = [r for r in _run(path).scenarios[0].rows if r.kind == "expect" and not r.ok]
    assert "no 'kv_dupe' under 'tp'" in rows[0].detail
    assert "kv_dup_factor, name, output_tok_s_per_gpu" in rows[0].detail


@pytest.mark.parametrize(
    ("old", "new", "fragments"),
    [
        ("- tp.kv_dup_factor == 8", "- tp.kv_dup_factor[0] == 8", ["demo.yaml:10", "expect[1]"]),
        ("kind: mla_path", "kind: mla_pth", ["demo.yaml:7", "unknown kind 'mla_pth'"]),
        ("new_tokens: 1,", "new_tokens: 0,", ["demo.yaml:7", "new_tokens"]),
        ("rel_tol: 0.02", "rel_tol: -1", ["demo.yaml:13", "golden.rel_tol"]),
        ("rel_tol: 0.02", "tolerances: {ttft_s.p99: 0.1}", ["match no stored metric"]),
        ("deployments:", "deployments: [", ["demo.yaml:4", "YAML syntax"]),
    ],
)
def test_malformed_check_blocks_name_file_and_line(
    tmp_path: Path, old: str, new: str, fragments: list[str]
) -> None:
    path = _write(tmp_path, SCENARIO.replace(old, new))
    report = _run(path)
    rows = report.scenarios[0].rows
    assert not report.ok and rows[-1].kind == "error"
    text = rows[-1].label + " " + rows[-1].detail
    for fragment in fragments:
        assert fragment in text
    assert "ERROR" in _text(report)


def test_discovery_skips_goldens_and_non_scenarios(tmp_path: Path) -> None:
    scen = _write(tmp_path, SCENARIO)
    (tmp_path / "sub").mkdir()
    nested = _write(tmp_path / "sub", SCENARIO, "nested.yml")
    other = _write(tmp_path, "just: data\n", "notes.yaml")
    _write(tmp_path, "{}", "golden.json")
    found, skipped = discover([tmp_path])
    assert found == [scen, nested] and skipped == [other]
    report = _run(tmp_path, update_golden=True)
    assert report.ok and len(report.scenarios) == 2
    assert "skipped" in _text(report) and "notes.yaml" in _text(report)


def test_parallel_matches_serial(tmp_path: Path) -> None:
    for i in range(3):
        _write(tmp_path, SCENARIO.replace("name: demo", f"name: demo{i}"), f"s{i}.yaml")
    check_paths([tmp_path], jobs=1, runner=fake_runner, update_golden=True)
    serial = check_paths([tmp_path], jobs=1, runner=fake_runner)
    parallel = check_paths([tmp_path], jobs=2, runner=fake_runner)
    assert serial.ok and parallel.ok
    assert [s.rows for s in serial.scenarios] == [s.rows for s in parallel.scenarios]
    assert [s.name for s in parallel.scenarios] == ["demo0", "demo1", "demo2"]


def test_empty_or_missing_paths(tmp_path: Path) -> None:
    assert not _run(tmp_path).ok  # nothing to check is a failure, not a silent pass
    with pytest.raises(FileNotFoundError):
        _run(tmp_path / "nope")


def test_yaml_line() -> None:
    assert yaml_line(SCENARIO, ["expect", 2]) == 11
    assert yaml_line(SCENARIO, ["deployments", 1, "attn_tp"]) == 5
    assert yaml_line(SCENARIO, ["nope"]) is None
