"""A sweep killed with SIGINT or SIGKILL and run again loses no finished point and writes the
same rows as an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.builders import TINY

ROOT = Path(__file__).resolve().parents[2]

AXES = ["--set", "workload.rate_req_s=1,2,3,4", "--set", "run.duration_s=4"]


def _sweep(sc: Path, out: Path, journal: Path) -> subprocess.Popen[bytes]:
    cli = [sys.executable, "-c", "from sim.cli import main; main()"]
    cmd = [*cli, "sweep", str(sc), *AXES, "--backend", "serial",
           "--json", str(out), "--journal", str(journal)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(cmd, cwd=sc.parent, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)  # fmt: skip


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_killed_sweep_resumes_without_loss(tmp_path: Path, sig: signal.Signals) -> None:
    sc = tmp_path / "tiny.yaml"
    sc.write_text(yaml.safe_dump(TINY, sort_keys=False))
    whole, whole_j = tmp_path / "whole.json", tmp_path / "whole.jsonl"
    assert _sweep(sc, whole, whole_j).wait(timeout=300) == 0
    cut, cut_j = tmp_path / "cut.json", tmp_path / "cut.jsonl"
    proc = _sweep(sc, cut, cut_j)
    deadline = time.monotonic() + 300
    while _lines(cut_j) < 1 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(sig)
    proc.wait(timeout=60)
    kept = _lines(cut_j)
    assert kept >= 1 and not cut.exists()  # killed mid-sweep: points on record, no output yet
    assert _sweep(sc, cut, cut_j).wait(timeout=300) == 0
    assert _lines(cut_j) == 4  # the rerun added only the missing points
    assert json.loads(cut.read_text()) == json.loads(whole.read_text())
