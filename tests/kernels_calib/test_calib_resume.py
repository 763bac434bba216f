"""A calibration run killed by SIGKILL leaves a valid partial profile, and a rerun completes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernels_calib import cli
from kernels_calib.resume import journal_path
from sim.catalog.profiles import parse_profile
from sim.specs.profile import Profile

pytestmark = pytest.mark.slow  # each test runs the CPU calibration (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
# three families of the quick CPU plan, the lightest (GEMM and MoE in BF16 are the slow ones on
# a CPU without AVX-512): the resume logic is the same whichever modules run
OPS = "mla_decode,elementwise,dsa"
# the run in the child: elementwise blocks once started, so the kill lands after mla_decode
CHILD = """
import sys, time
from kernels_calib import cli, elementwise
elementwise.run = lambda ctx: time.sleep(600)
sys.exit(cli.main(sys.argv[1:]))
"""


def _read(path: Path) -> Profile:
    """The profile in `path` as it is now (the catalog's loader caches by path)."""
    return parse_profile(json.loads(path.read_text()), str(path))


def _args(out: Path) -> list[str]:
    return ["--device", "cpu", "--quick", "--ops", OPS, "--out", str(out), "--no-progress"]


def _kill_after_first_module(out: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, *_args(out)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not out.exists():
            assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
            assert time.monotonic() < deadline, "no checkpoint written within 120 s"
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=30)
        if child.stderr:
            child.stderr.close()
    assert child.returncode == -signal.SIGKILL


def test_sigkill_leaves_a_valid_partial_profile_that_a_rerun_completes(tmp_path: Path) -> None:
    out = tmp_path / "cpu.json"
    _kill_after_first_module(out)

    partial = _read(out)  # parses and validates: not half a file
    assert {t.op for t in partial.tables} == {"mla_decode"}
    assert any(
        n.startswith("incomplete: kernels_calib.elementwise, kernels_calib.dsa not yet run")
        for n in partial.notes
    )
    lines = journal_path(out).read_text().splitlines()
    assert [json.loads(line)["id"].split(":")[1] for line in lines] == ["mla_decode"]

    assert cli.main(_args(out)) == 0  # same options: resumes
    whole = _read(out)
    ops = {t.op for t in whole.tables}
    assert {"mla_decode", "elementwise", "dsa_attn_decode", "dsa_indexer_prefill"} <= ops
    assert "kernels_calib.mla_decode: restored from cpu.json.journal.jsonl (an earlier run)" in (
        whole.notes
    )
    assert not any(n.startswith("incomplete:") for n in whole.notes)
    decode = [t for t in whole.tables if t.op == "mla_decode"]
    assert decode == [t for t in partial.tables if t.op == "mla_decode"]  # kept, not re-timed
    assert not journal_path(out).exists()  # complete: the next run measures afresh


def test_a_rerun_with_other_options_measures_afresh(tmp_path: Path) -> None:
    out = tmp_path / "cpu.json"
    _kill_after_first_module(out)
    assert cli.main([*_args(out), "--seed", "1"]) == 0
    whole = _read(out)
    assert not any("restored from" in n for n in whole.notes)
    assert not journal_path(out).exists()
