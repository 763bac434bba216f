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
