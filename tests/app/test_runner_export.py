"""The app's run plumbing: per-deployment split and merge, worker results, YAML/CSV export, and
the load sweep, each against the simulator's own entry points."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from app import export, runner, sweep, workers
from app.pages_.whatif import DEFAULT
from sim.io.results_io import write_csv, write_json
from sim.io.scenario_io import parse_scenario
from sim.metrics.stats import censored_quantile
from sim.run import run_scenario
from sim.specs.scenario import Scenario


def _scenario(**run: float) -> Scenario:
    data = DEFAULT | {"model": "deepseek-v3", "gpu": "h200"}
    data = data | {"run": DEFAULT["run"] | run}
    return Scenario.model_validate(data)


@pytest.fixture(scope="module")
def small() -> Scenario:
    return _scenario(duration_s=20.0, warmup_s=0.0)


@pytest.fixture(scope="module")
def pool() -> Iterator[workers.Workers]:
    w = workers.start(workers=2)
    yield w
    w.close()


def test_canonical_json_ignores_how_the_scenario_was_written(small: Scenario) -> None:
    again = parse_scenario(export.scenario_yaml(small))
    assert runner.canonical_json(again) == runner.canonical_json(small)
    other = small.model_copy(update={"name": "renamed"})
    assert runner.content_hash(other) != runner.content_hash(small)


def test_split_keeps_everything_but_the_other_deployments(small: Scenario) -> None:
    parts = [Scenario.model_validate_json(p) for p in runner.split(small)]
    assert [[d.name for d in p.deployments] for p in parts] == [["tp8"], ["dp8_ep8"]]
    assert all(p.workload == small.workload and p.run == small.run for p in parts)


def test_split_runs_merge_to_run_scenario(small: Scenario, pool: workers.Workers) -> None:
    parts = [pool.pool.submit(workers.simulate, p).result() for p in runner.split(small)]
    merged = runner.merge([p["results"] for p in parts])
    assert merged == run_scenario(small)  # same seed, same requests: identical results
    counts = []
    for part, dep in zip(parts, merged.deployments, strict=True):
        ttft = part["samples"][dep.name]["TTFT"]
        waiting = np.array(part["samples"][dep.name][workers.WAITING])
        counts.append(len(ttft))
        assert len(ttft) == dep.ttft_s.count
        if ttft:  # same definition
            assert censored_quantile(np.array(ttft), waiting, 90) == dep.ttft_s.p90
    assert max(counts) > 0


def test_progress_reaches_the_queue(small: Scenario, pool: workers.Workers) -> None:
    inbox = pool.manager.Queue()
    pool.pool.submit(workers.simulate, runner.split(small)[1], inbox).result()
    seen = []
    while not inbox.empty():
        seen.append(inbox.get())
    assert seen and seen[-1] == ("dp8_ep8", 1.0)
    assert [f for _, f in seen] == sorted(f for _, f in seen)


def test_results_files_match_the_cli(small: Scenario, tmp_path: Path) -> None:
    results = run_scenario(small)
    text = export.results_csv(results)
    assert text.encode() == write_csv(results, tmp_path / "r.csv").read_bytes()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["name"] for r in rows] == ["tp8", "dp8_ep8"]
    assert float(rows[1]["kv_dup_factor"]) == 1.0
    assert export.results_json(results) == write_json(results, tmp_path / "r.json").read_text()


def test_scenario_yaml_round_trip_and_reads_like_a_file(small: Scenario) -> None:
    text = export.scenario_yaml(small)
    assert parse_scenario(text) == small
    first = text.split("deployments:")[1].splitlines()[1:5]
    assert first == ["- name: tp8", "  nodes: 1", "  gpus_per_node: 8", "  attn_tp: 8"]
    assert "workload:\n  kind: closed\n" in text


def test_sweep_scales_the_load(small: Scenario) -> None:
    base = DEFAULT["workload"]["concurrency"]
    points = sweep.sweep_scenarios(small, (0.5, 1.0, 2.0))
    assert [load for load, _ in points] == [base / 2, base, base * 2]
    assert [s.workload.concurrency for _, s in points] == [base // 2, base, base * 2]  # type: ignore[union-attr]
    workload = DEFAULT["workload"] | {"kind": "poisson", "rate_req_s": 3.0}
    workload.pop("concurrency")
    workload.pop("ramp_s")  # closed-loop only
    open_loop = Scenario.model_validate(small.model_dump() | {"workload": workload})
    assert sweep.load_of(open_loop) == ("rate_req_s", 3.0)


def test_run_sweep_in_processes(small: Scenario, pool: workers.Workers) -> None:
    done: list[int] = []
    curves = sweep.run_sweep(pool.pool, small, (0.5, 1.0), on_point=lambda k, n: done.append(k))
    assert done == [1, 2]
    assert list(curves) == ["tp8", "dp8_ep8"]
    at_base = run_scenario(small).deployment("dp8_ep8").output_tok_s_per_gpu
    dp = curves["dp8_ep8"]
    base = DEFAULT["workload"]["concurrency"]
    assert [p["concurrency"] for p in dp] == [base / 2, base]
    assert dp[1]["output_tok_s_per_gpu"] == pytest.approx(at_base)
