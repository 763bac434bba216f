"""The append-only journal: records survive, a torn last line is skipped and healed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.io.journal import Journal, JournalError, read_journal, write_atomic


def test_append_and_reread(tmp_path: Path) -> None:
    j = Journal(tmp_path / "r.jsonl")
    j.append({"id": "a", "x": 1})
    j.append({"id": "b", "x": 2})
    again = Journal(tmp_path / "r.jsonl")
    assert set(again.done) == {"a", "b"} and again.done["b"]["x"] == 2
    assert "a" in again and len(again) == 2


def test_torn_last_line_is_skipped_then_healed(tmp_path: Path) -> None:
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps({"id": "a", "x": 1}) + "\n" + '{"id": "b", "x"')
    j = Journal(p)
    assert set(j.done) == {"a"}
    j.append({"id": "b", "x": 2})
    assert read_journal(p) == {"a": {"id": "a", "x": 1}, "b": {"id": "b", "x": 2}}


def test_malformed_middle_line_names_the_line(tmp_path: Path) -> None:
    p = tmp_path / "r.jsonl"
    p.write_text('{"id": "a"}\nnot json\n{"id": "c"}\n')
    with pytest.raises(JournalError, match=r"r.jsonl:2"):
        read_journal(p)


def test_record_needs_an_id_and_finite_numbers(tmp_path: Path) -> None:
    j = Journal(tmp_path / "r.jsonl")
    with pytest.raises(JournalError):
        j.append({"x": 1})
    with pytest.raises(ValueError):
        j.append({"id": "a", "x": float("inf")})


def test_write_atomic_leaves_no_temporary(tmp_path: Path) -> None:
    p = write_atomic(tmp_path / "out" / "report.md", "hello\n")
    assert p.read_text() == "hello\n"
    assert [f.name for f in p.parent.iterdir()] == ["report.md"]
