"""`bench/callgrind.py`: each marked part's instructions, read from callgrind's dumps."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.builders import bench_script

CALLGRIND = Path(__file__).resolve().parents[2] / "bench" / "callgrind.py"


def _module() -> ModuleType:
    return bench_script("callgrind")


def _fake_valgrind(totals: list[int], cmds: list[list[str]] | None = None) -> Any:
    """A stand-in for `subprocess.run` that writes callgrind's dumps: start-up, then `totals`
    (and keeps each command in `cmds`)."""

    def run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if cmds is not None:
            cmds.append(cmd)
        out = next(a for a in cmd if a.startswith("--callgrind-out-file=")).split("=", 1)[1]
        for k, n in enumerate([999, *totals], start=1):
            Path(f"{out}.{k}").write_text(f"# callgrind format\nevents: Ir\nsummary: {n}\n")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    return run


def test_each_part_is_the_dump_after_its_mark(monkeypatch: pytest.MonkeyPatch) -> None:
    cg = _module()
    monkeypatch.setattr(cg.subprocess, "run", _fake_valgrind([1_200, 3_400]))
    assert cg.count(["script.py"], 2) == [1_200, 3_400]  # start-up's dump left out


def test_a_late_count_starts_uninstrumented(monkeypatch: pytest.MonkeyPatch) -> None:
    cg = _module()
    cmds: list[list[str]] = []
    monkeypatch.setattr(cg.subprocess, "run", _fake_valgrind([5, 6], cmds))
    assert cg.count(["script.py"], 2, from_start=False) == [5, 6]
    assert cg.count(["script.py"], 2) == [5, 6]
    assert ["--instr-atstart=no" in c for c in cmds] == [True, False]


def test_a_window_instruments_only_between_its_two_marks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a late count a part runs uninstrumented outside its marks: instrumentation goes on
    before its first mark (a mark made uninstrumented would not dump) and off after its
    second."""
    cg = _module()
    calls: list[str] = []
    monkeypatch.setattr(cg, "instrument", lambda on: calls.append("on" if on else "off"))
    monkeypatch.setattr(cg, "mark", lambda: calls.append("mark"))
    for _ in range(2):  # a new one per part
        window = cg.Window()
        window(), window()
    assert calls == ["on", "mark", "mark", "off"] * 2


def test_a_part_without_its_dump_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    cg = _module()
    monkeypatch.setattr(cg.subprocess, "run", _fake_valgrind([1_200]))
    with pytest.raises(RuntimeError, match="part 2 of 2"):
        cg.count(["script.py"], 2)


def _script(path: Path, body: str) -> str:
    """A script at `path` that imports `callgrind` and defines `work(n)` (n loop rounds), then
    runs `body`; its path."""
    path.write_text(
        f"import sys; sys.path.insert(0, {str(CALLGRIND.parent)!r})\n"
        "import callgrind\n"
        "def work(n):\n    s = 0\n    for i in range(n):\n        s += i * i\n    return s\n" + body
    )
    return str(path)


needs_valgrind = pytest.mark.skipif(
    _module().available() is False, reason="valgrind is not installed"
)


@pytest.mark.slow
@needs_valgrind
def test_a_part_doing_ten_times_the_work_counts_about_ten_times_the_instructions(
    tmp_path: Path,
) -> None:
    body = "callgrind.mark(); work(20_000)\ncallgrind.mark(); work(200_000)\ncallgrind.mark()\n"
    small, large = _module().count([_script(tmp_path / "parts.py", body)], 2)
    assert 8 < large / small < 12


@pytest.mark.slow
@needs_valgrind
def test_a_part_counted_late_counts_what_it_counts_instrumented_from_the_start(
    tmp_path: Path,
) -> None:
    cg = _module()
    script = _script(
        tmp_path / "late.py",
        "work(300_000)  # uncounted: run uninstrumented when late\n"
        "if sys.argv[1] == 'late': callgrind.instrument(True)\n"
        "callgrind.mark(); work(50_000)\ncallgrind.mark()\n",
    )
    (early,) = cg.count([script, "early"], 1)
    (late,) = cg.count([script, "late"], 1, from_start=False)
    assert late == pytest.approx(early, rel=1e-3)
