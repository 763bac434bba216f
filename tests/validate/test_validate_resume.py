"""A validation run killed by SIGINT or SIGKILL, started again, loses no finished row and ends
with the report an uninterrupted run gives."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sim.io.journal import read_journal

pytest.importorskip("aiconfigurator_core")

IDS = (
    "dsr1_h200_sglang_fp8_agg_1024x1024_c4_cfg81",
    "dsr1_h200_sglang_fp8_agg_1024x1024_c8_cfg81",
    "dsr1_h200_sglang_fp8_agg_8192x1024_c4_cfg81",
    "dsr1_h200_sglang_fp8_agg_8192x1024_c8_cfg81",
    "dsr1_h200_sglang_fp8_agg_1024x1024_c16_cfg81",
)
ROOT = Path(__file__).resolve().parents[2]


def _cmd(ids: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-c",
        "from sim.cli import main; main()",
        "validate",
        "--dataset",
        "aic",
        "--ids",
        str(ids),
        "--backend",
        "serial",
        "--out",
        str(out),
        "--every",
        "1",
        # short benchmarks: this test is about resuming, not the figures
        "--warmup-per-user",
        "0",
        "--requests-per-user",
        "2",
    ]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _without_wall(s: Any) -> Any:
    if isinstance(s, dict):
        return {k: _without_wall(v) for k, v in s.items() if not k.startswith("wall_s")}
    if isinstance(s, list):
        return [_without_wall(v) for v in s]
    return s


def _summary(out: Path) -> Any:
    return _without_wall(json.loads((out / "summary.json").read_text()))


@pytest.fixture(scope="module")
def ids_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("ids") / "ids.txt"
    p.write_text("# rows of the resume test\n" + "\n".join(IDS) + "\n")
    return p


@pytest.fixture(scope="module")
def uninterrupted(ids_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp("whole")
    subprocess.run(_cmd(ids_file, out), env=_env(), check=True, capture_output=True)
    return _summary(out)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_killed_run_resumes_without_losing_rows(
    sig: signal.Signals, ids_file: Path, tmp_path: Path, uninterrupted: Any
) -> None:
    journal = tmp_path / "results.jsonl"
    proc = subprocess.Popen(
        _cmd(ids_file, tmp_path), env=_env(), stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists() and journal.read_bytes().count(b"\n") >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(sig)
    proc.wait(timeout=60)
    before = read_journal(journal)  # readable after the kill
    assert 2 <= len(before) < len(IDS)

    subprocess.run(_cmd(ids_file, tmp_path), env=_env(), check=True, capture_output=True)
    after = read_journal(journal)
    assert set(after) == set(IDS)
    for rid, rec in before.items():  # kept as written, not redone
        assert after[rid] == rec
    assert _summary(tmp_path) == uninterrupted
