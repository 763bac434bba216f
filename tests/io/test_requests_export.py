"""Per-request records (`mlasim run --requests`): the summary's statistics rebuild from them,
their trace columns replay, and both formats carry the same rows."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from sim.cli.run import register
from sim.io.requests_io import COLUMNS, write_requests
from sim.io.scenario_io import parse_scenario
from sim.io.workload_csv import read_trace
from sim.metrics.stats import censored_quantile
from sim.run import simulate_scenario, summarize_scenario
from tests.builders import SHORT_TEXT as SHORT
from tests.builders import SMALL_TEXT
from tests.engine.fixed_cost import small_factory


@pytest.fixture(scope="module")
def run() -> Any:
    sc = parse_scenario(SMALL_TEXT)
    outputs = simulate_scenario(sc, cost_factory=small_factory)
    return sc, outputs, summarize_scenario(sc, outputs)


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _floats(rows: list[dict[str, str]], col: str) -> np.ndarray:
    return np.array([float(r[col]) if r[col] else np.nan for r in rows])


def test_csv_rows_rebuild_the_summary(run: Any, tmp_path: Path) -> None:
    sc, outputs, results = run
    path = write_requests(outputs, tmp_path / "req.csv")
    rows = _read_csv(path)
    assert list(rows[0]) == list(COLUMNS)
    assert len(rows) == sum(o.table.size for o in outputs)  # nothing dropped
    for d in results.deployments:
        mine = [r for r in rows if r["deployment"] == d.name]
        assert [int(r["request_id"]) for r in mine] == list(range(len(mine)))
        window = [r for r in mine if r["after_warmup"] == "True"]
        status = [r["status"] for r in window]
        assert status.count("done") == d.requests.completed
        assert status.count("queued") == d.requests.queued
        assert status.count("rejected") == d.requests.rejected
        assert (
            len(window) - status.count("done") - status.count("queued") - status.count("rejected")
            == d.requests.running
        )
        done = [r for r in window if r["status"] == "done"]
        # TTFT: every request with a first token; those still waiting count by their wait
        ttft = _floats(window, "ttft_s")
        waiting = [r for r in window if r["ttft_s"] == "" and r["status"] != "rejected"]
        waited = d.window_s + sc.run.warmup_s - _floats(waiting, "arrival_s")
        p90 = censored_quantile(ttft[np.isfinite(ttft)], waited, 90)
        assert p90 == pytest.approx(d.ttft_s.p90, rel=1e-12)
        tpot = _floats(done, "tpot_s")
        assert np.percentile(tpot[np.isfinite(tpot)], 50) == pytest.approx(d.tpot_s.p50, rel=1e-12)
        e2e = _floats(done, "e2e_s")
        assert e2e == pytest.approx(_floats(done, "finish_s") - _floats(done, "arrival_s"))
        assert all(int(r["generated_tokens"]) == int(r["output_tokens"]) for r in done)
    unfinished = [r for r in rows if r["status"] != "done"]
    assert unfinished, "requests are still in flight when the run ends"
    assert all(r["finish_s"] == "" and r["e2e_s"] == "" for r in unfinished)
    no_token = [r for r in unfinished if r["first_token_s"] == ""]
    assert all(r["ttft_s"] == "" and r["status"] != "decode" for r in no_token)


def test_trace_columns_replay(run: Any, tmp_path: Path) -> None:
    _, outputs, _ = run
    rows = _read_csv(write_requests(outputs[:1], tmp_path / "req.csv"))
    trace = tmp_path / "trace.csv"
    with trace.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS[:4])
        w.writerows([r[c] for c in COLUMNS[:4]] for r in rows)
    batch = read_trace(trace)
    table = outputs[0].table
    n = table.size
    assert np.array_equal(batch.arrival_s, table.arrival_s[:n])
    assert np.array_equal(batch.input_tokens, table.input_tokens[:n])
    assert np.array_equal(batch.cached_tokens, table.cached_tokens[:n])


def test_parquet_has_the_csv_rows_with_nulls(run: Any, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    _, outputs, _ = run
    table = pq.read_table(write_requests(outputs, tmp_path / "req.parquet"))
    rows = _read_csv(write_requests(outputs, tmp_path / "req.csv"))
    assert table.column_names == list(COLUMNS)
    assert table.num_rows == len(rows)
    ttft = table.column("ttft_s").to_pylist()
    assert [t is None for t in ttft] == [r["ttft_s"] == "" for r in rows]
    assert table.column("status").to_pylist() == [r["status"] for r in rows]


def test_unknown_suffix_is_refused(run: Any, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.csv or \.parquet; got \.txt"):
        write_requests(run[1], tmp_path / "req.txt")


def test_cli_writes_requests_and_checks_the_suffix_first(tmp_path: Path) -> None:
    app = typer.Typer()
    register(app)
    sc = tmp_path / "short.yaml"
    sc.write_text(SHORT)
    bad = CliRunner().invoke(app, ["run", str(sc), "--requests", str(tmp_path / "r.xlsx")])
    assert bad.exit_code == 2
    assert "must end in .csv or .parquet" in bad.output
    out = tmp_path / "r.csv"
    ok = CliRunner().invoke(app, ["run", str(sc), "--requests", str(out)])
    assert ok.exit_code == 0, ok.output
    names = {r["deployment"] for r in _read_csv(out)}
    assert names == {d.name for d in parse_scenario(SHORT).deployments}
