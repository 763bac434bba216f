"""Append-only result journals (JSON Lines) that survive a killed run, and atomic file writes.

A long job (a validation run, a sweep, a capacity search, a plan) appends one JSON object per
finished point, keyed by a string id, and flushes and fsyncs each line, so a SIGINT or SIGKILL
loses at most the point in flight. Reading tolerates a torn last line (a write cut short by a
kill): it is ignored, and the next append cuts it off first. A rerun reads the journal, skips
the ids it holds and appends the rest; `write_atomic` writes final outputs under a temporary name
and renames them, so a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ID_KEY = "id"


class JournalError(ValueError):
    """A journal line that is not a JSON object with an id, other than a torn last line."""


def read_journal(path: str | Path) -> dict[str, dict[str, Any]]:
    """Records by id (a later record of the same id wins); {} when the file does not exist.

    Raises `JournalError` naming the line for a malformed line that is not the last one (a torn
    last line, with no newline after it, is what a kill leaves and is skipped)."""
    p = Path(path)
    if not p.exists():
        return {}
    data = p.read_bytes()
    lines = data.split(b"\n")
    torn = lines[-1]  # b"" when the file ends with a newline
    out: dict[str, dict[str, Any]] = {}
    for n, raw in enumerate(lines[:-1], start=1):
        if not raw.strip():
            continue
        out.update(_parse(raw, p, n))
    if torn.strip():
        with contextlib.suppress(JournalError):  # cut short by a kill: the point is redone
            out.update(_parse(torn, p, len(lines)))
    return out


def _parse(raw: bytes, path: Path, line: int) -> dict[str, dict[str, Any]]:
    try:
        rec = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise JournalError(f"{path}:{line}: not a JSON line ({exc}); delete the line") from None
    if not isinstance(rec, dict) or not isinstance(rec.get(ID_KEY), str):
        raise JournalError(f"{path}:{line}: a journal line is a JSON object with a string 'id'")
    return {rec[ID_KEY]: rec}


class Journal:
    """One append-only JSONL file; `done` holds the records already in it, by id."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.done: dict[str, dict[str, Any]] = read_journal(self.path)

    def __contains__(self, key: str) -> bool:
        return key in self.done

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.done.values())

    def __len__(self) -> int:
        return len(self.done)

    def append(self, record: dict[str, Any]) -> None:
        """Write one record (it must have a string `id`) as one flushed, fsynced line."""
        if not isinstance(record.get(ID_KEY), str):
            raise JournalError("a journal record needs a string 'id'")
        line = json.dumps(record, allow_nan=False, separators=(",", ":")) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _drop_torn_tail(self.path)
        with open(self.path, "ab") as f:
            f.write(line.encode())
            f.flush()
            os.fsync(f.fileno())
        self.done[record[ID_KEY]] = record


def _drop_torn_tail(path: Path) -> None:
    """Cut a last line with no newline (a write a kill cut short) so the next record starts a
    line of its own; its point was not recorded and is redone."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return
        f.seek(0)
        data = f.read()
        f.truncate(data.rfind(b"\n") + 1)


def write_atomic(path: str | Path, text: str | bytes) -> Path:
    """Write `text` to `path` through a temporary file in the same folder and a rename."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode() if isinstance(text, str) else text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p
