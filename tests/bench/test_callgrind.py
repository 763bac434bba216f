"""`bench/callgrind.py`: each marked part's instructions, read from callgrind's dumps."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

CALLGRIND = Path(__file__).resolve().parents[2] / "bench" / "callgrind.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("callgrind_under_test", CALLGRIND)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fake_valgrind(totals: list[int]) -> Any:
    """A stand-in for `subprocess.run` that writes callgrind's dumps: start-up, then `totals`."""

    def run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        out = next(a for a in cmd if a.startswith("--callgrind-out-file=")).split("=", 1)[1]
        for k, n in enumerate([999, *totals], start=1):
            Path(f"{out}.{k}").write_text(f"# callgrind format\nevents: Ir\nsummary: {n}\n")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    return run


def test_each_part_is_the_dump_after_its_mark(monkeypatch: pytest.MonkeyPatch) -> None:
    cg = _module()
    monkeypatch.setattr(cg.subprocess, "run", _fake_valgrind([1_200, 3_400]))
    assert cg.count(["script.py"], 2) == [1_200, 3_400]  # start-up's dump left out


def test_a_part_without_its_dump_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    cg = _module()
    monkeypatch.setattr(cg.subprocess, "run", _fake_valgrind([1_200]))
    with pytest.raises(RuntimeError, match="part 2 of 2"):
        cg.count(["script.py"], 2)


@pytest.mark.slow
@pytest.mark.skipif(_module().available() is False, reason="valgrind is not installed")
def test_a_part_doing_ten_times_the_work_counts_about_ten_times_the_instructions(
    tmp_path: Path,
) -> None:
    cg = _module()
    script = tmp_path / "parts.py"
    script.write_text(
        f"import sys; sys.path.insert(0, {str(CALLGRIND.parent)!r})\n"
        "import callgrind\n"
        "def work(n):\n    s = 0\n    for i in range(n):\n        s += i * i\n    return s\n"
        "callgrind.mark(); work(20_000)\ncallgrind.mark(); work(200_000)\ncallgrind.mark()\n"
    )
    small, large = cg.count([str(script)], 2)
    assert 8 < large / small < 12
