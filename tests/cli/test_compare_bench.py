"""`mlasim compare-bench` on the format samples in tests/fixtures/bench: measured beside
simulated for the same benchmark, and clear errors for a file it cannot read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.io.scenario_io import load_scenario
from sim.run import run_scenario

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bench"
SCENARIO = FIXTURES / "bench_scenario.yaml"
runner = CliRunner()


def _row(output: str, label: str) -> list[str]:
    """The cells of the table row whose first cell is `label`."""
    for line in output.splitlines():
        cells = [c.strip() for c in line.replace("┃", "│").split("│") if c.strip()]
        if cells and cells[0] == label:
            return cells
    raise AssertionError(f"no row {label!r} in:\n{output}")


@pytest.fixture(scope="module")
def simulated():
    [dep] = run_scenario(load_scenario(SCENARIO)).deployments
    assert dep.benchmark is not None
    return dep.benchmark


@pytest.mark.parametrize(
    ("sample", "tool", "ttft_ms", "e2e_ms"),
    [
        # bench_serving appends a line per run: the last one (145 ms, not the first's 150) counts
        ("bench_serving_sample.jsonl", "sglang bench_serving", 145.0, 880.0),
        ("vllm_bench_sample.json", "vllm bench serve", 145.0, 880.0),
    ],
)
def test_measured_beside_simulated(sample, tool, ttft_ms, e2e_ms, simulated) -> None:
    res = runner.invoke(app, ["compare-bench", str(FIXTURES / sample), "--scenario", str(SCENARIO)])
    assert res.exit_code == 0, res.output
    assert f"measured ({tool})" in res.output
    _, meas, sim, ratio = _row(res.output, "TTFT ms mean")
    assert float(meas) == ttft_ms
    assert float(sim) == pytest.approx(simulated.ttft.mean_ms, rel=1e-3)  # printed to 4 digits
    assert ratio == f"{float(sim) / ttft_ms:.2f}x"
    assert float(_row(res.output, "E2E ms mean")[1]) == e2e_ms  # bench_serving/vllm names differ
    completed = _row(res.output, "completed requests")
    assert completed[1:3] == ["8", "8"]  # the fixture scenario is the same 8-prompt benchmark
    assert "not the same benchmark" not in res.output


def test_a_different_benchmark_is_named(tmp_path: Path) -> None:
    rec = json.loads((FIXTURES / "vllm_bench_sample.json").read_text())
    path = tmp_path / "other.json"
    path.write_text(json.dumps({**rec, "max_concurrency": 16}))
    res = runner.invoke(app, ["compare-bench", str(path), "--scenario", str(SCENARIO)])
    assert res.exit_code == 0, res.output
    assert "max_concurrency 16, the scenario 4: not the same benchmark" in res.output


def test_a_missing_field_is_named(tmp_path: Path) -> None:
    rec = json.loads((FIXTURES / "vllm_bench_sample.json").read_text())
    del rec["mean_tpot_ms"]
    path = tmp_path / "short.json"
    path.write_text(json.dumps(rec))
    res = runner.invoke(app, ["compare-bench", str(path), "--scenario", str(SCENARIO)])
    assert res.exit_code == 2
    assert "missing field 'mean_tpot_ms'" in res.output


def test_a_scenario_without_a_benchmark_workload_is_refused(tmp_path: Path) -> None:
    text = SCENARIO.read_text().replace(
        "  kind: benchmark\n  num_prompts: 8\n  max_concurrency: 4\n"
        "  input_tokens: 1024\n  output_tokens: 16\n",
        "  kind: closed\n  concurrency: 4\n  input: {kind: fixed, tokens: 1024}\n"
        "  output: {kind: fixed, tokens: 16}\n",
    )
    assert "kind: closed" in text
    sc = tmp_path / "closed.yaml"
    sc.write_text(text.replace("run: {seed: 1}", "run: {seed: 1, max_requests: 8}"))
    res = runner.invoke(
        app, ["compare-bench", str(FIXTURES / "vllm_bench_sample.json"), "--scenario", str(sc)]
    )
    assert res.exit_code == 2
    assert "compare-bench needs kind: benchmark" in res.output
