"""The runner skips rows its journal holds and survives a torn last line."""

from __future__ import annotations

import json
from pathlib import Path

from sim.search.backends import SerialBackend
from sim.validate.mapping import Mapped, map_row
from sim.validate.rows import read_rows
from sim.validate.runner import JOURNAL_NAME, run_rows


def test_resume_skips_finished_rows_and_redoes_a_torn_one(row_csv, tmp_path: Path) -> None:
    rows, _ = read_rows(row_csv({"id": "a", "osl": 8}, {"id": "b", "osl": 8, "isl": 512}))
    mapped = [m for m in (map_row(r) for r in rows) if isinstance(m, Mapped)]
    assert len(mapped) == 2
    out = tmp_path / "out"
    with SerialBackend() as be:
        first = run_rows(mapped[:1], out, be)
    kept = first.done["a"]
    path = out / JOURNAL_NAME
    with path.open("ab") as f:  # what a kill mid-write leaves: half of b's line
        f.write(json.dumps({"id": "b", "status": "ok"}).encode()[:9])
    with SerialBackend() as be:
        second = run_rows(mapped, out, be)
    assert set(second.done) == {"a", "b"} and second.done["a"] == kept
    lines = path.read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["a", "b"]


def test_a_row_recorded_with_other_benchmark_counts_is_run_again(row_csv, tmp_path: Path) -> None:
    from sim.validate.workload import BenchCounts

    [row], _ = read_rows(row_csv({"id": "a", "osl": 8}))
    short, long = (map_row(row, counts=BenchCounts(0, n)) for n in (1, 2))
    assert isinstance(short, Mapped) and isinstance(long, Mapped)
    out = tmp_path / "out"
    with SerialBackend() as be:
        run_rows([short], out, be)
        again = run_rows([short], out, be)  # same counts: nothing to do
        assert again.done["a"]["benchmark"] == {
            "warmup_requests": 0, "num_prompts": 8, "request_path": "none",
        }  # fmt: skip
        redone = run_rows([long], out, be)
        assert redone.done["a"]["benchmark"] == {
            "warmup_requests": 0, "num_prompts": 16, "request_path": "none",
        }  # fmt: skip
        # the same counts with the engine's request path between send and engine: run again
        path = map_row(row, counts=BenchCounts(0, 2, request_path="engine"))
        assert isinstance(path, Mapped)
        rerun = run_rows([path], out, be)
    assert rerun.done["a"]["benchmark"]["request_path"] == "engine"
    assert len((out / JOURNAL_NAME).read_text().splitlines()) == 3  # short, long, with the path


def test_a_row_recorded_by_other_simulator_code_is_run_again(row_csv, tmp_path: Path) -> None:
    """A journal left by an earlier build (the cost model changed since) is not read back as
    this build's result: its rows run again, and the report shows the new figures."""
    from sim.validate.runner import simulator_fingerprint

    [row], _ = read_rows(row_csv({"id": "a", "osl": 8}))
    m = map_row(row)
    assert isinstance(m, Mapped)
    out = tmp_path / "out"
    with SerialBackend() as be:
        first = run_rows([m], out, be)
    rec = first.done["a"]
    assert rec["simulator"] == simulator_fingerprint()
    stale = {**rec, "simulator": "0" * 16, "pred_tpot_ms": -1.0}
    (out / JOURNAL_NAME).write_text(json.dumps(stale) + "\n")
    with SerialBackend() as be:
        again = run_rows([m], out, be)
    assert again.done["a"]["pred_tpot_ms"] == rec["pred_tpot_ms"]
    assert again.done["a"]["simulator"] == simulator_fingerprint()
