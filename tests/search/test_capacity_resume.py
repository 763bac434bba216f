"""A capacity search killed with SIGINT or SIGKILL and run again loses no finished probe and
writes the same report as an uninterrupted search."""

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

OPTS = ["--target-rate", "50", "--tolerance", "0.2", "--max-runs", "6", "--backend", "serial",
        "--set", "run.duration_s=4"]  # fmt: skip


def _capacity(sc: Path, out: Path, journal: Path) -> subprocess.Popen[bytes]:
    cli = [sys.executable, "-c", "from sim.cli import main; main()"]
    cmd = [*cli, "capacity", str(sc), *OPTS, "--json", str(out), "--journal", str(journal)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(cmd, cwd=sc.parent, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)  # fmt: skip


def _ids(path: Path) -> list[str]:
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")[:-1]  # a torn last line is not a finished probe
    return [json.loads(line)["id"] for line in lines]


def _finish(proc: subprocess.Popen[bytes]) -> int:
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()
    return proc.returncode


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_killed_capacity_search_resumes_without_loss(tmp_path: Path, sig: signal.Signals) -> None:
    sc = tmp_path / "tiny.yaml"
    sc.write_text(yaml.safe_dump(TINY | {"deployments": TINY["deployments"][1:]}, sort_keys=False))
    whole, whole_j = tmp_path / "whole.json", tmp_path / "whole.jsonl"
    _finish(_capacity(sc, whole, whole_j))
    probes = _ids(whole_j)
    assert len(probes) >= 3
    cut, cut_j = tmp_path / "cut.json", tmp_path / "cut.jsonl"
    proc = _capacity(sc, cut, cut_j)
    deadline = time.monotonic() + 300
    while len(_ids(cut_j)) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    kept = _ids(cut_j)
    assert 2 <= len(kept) < len(probes) and not cut.exists()  # stopped mid-search
    assert kept == probes[: len(kept)]  # the same probes, in the same order
    _finish(_capacity(sc, cut, cut_j))
    assert _ids(cut_j) == probes  # the rerun added only the probes still missing
    assert json.loads(cut.read_text()) == json.loads(whole.read_text())
