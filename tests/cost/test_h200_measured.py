"""The bundled profile measured on an H200: what it holds, that the simulator prices from it,
and that the README and docs/h200-measured.md state its numbers as they are in the file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sim.catalog import load_gpu
from sim.catalog.profiles import load_profile
from sim.cost.calibrated import CalibratedCost
from tests.cost.calibrated_query import estimate, table_work

ROOT = Path(__file__).resolve().parents[2]
PROFILE = load_profile("h200-measured")


def test_it_was_measured_on_an_h200_and_every_kernel_passed_its_check() -> None:
    assert PROFILE.kind == "measured" and PROFILE.device.gpu == "h200"
    assert PROFILE.device.name == "NVIDIA H200" and PROFILE.device.driver
    assert not [n for n in PROFILE.notes if "FAILED" in n or "aborted" in n]
    impls = {t.impl for t in PROFILE.tables if t.op == "mla_decode"}
    assert impls == {"triton_mla"}
    assert {c.status for c in PROFILE.crossover} == {"crossed"}


def test_the_cost_model_prices_decode_from_it_as_measured() -> None:
    cost = CalibratedCost(PROFILE, load_gpu("h200"))
    key = {"s_q": 1, "kv_dtype": "bf16", "heads": 128}
    point = {"batch": 64.0, "kv_len": 4096.0}
    shape = PROFILE.model_shape
    assert shape is not None
    flops, nbytes = table_work("mla_decode", {**key, **point}, mla=shape.mla_spec())
    est = estimate(
        cost, "mla_decode", key=key, point=point, flops=flops, bytes_=nbytes, dtype="bf16"
    )
    table = next(t for t in PROFILE.tables if t.op == "mla_decode" and t.key == key)
    measured = next(p for p in table.points if p.at == point)
    assert est.source == "measured" and not est.extrapolated
    assert est.seconds * 1e6 == pytest.approx(measured.latency_us_p50, rel=1e-6)


def test_readme_and_doc_state_the_measured_crossover() -> None:
    found = {c.prefix_len_tokens: round(c.crossover_new_tokens or 0) for c in PROFILE.crossover}
    a, b, c = (found[p] for p in (4096, 16384, 32768))
    readme = (ROOT / "README.md").read_text()
    assert f"**{a}, {b} and {c} new tokens**" in " ".join(readme.split())
    doc = (ROOT / "docs" / "h200-measured.md").read_text()
    for point in PROFILE.crossover:
        absorb = " | ".join(f"{round(x):,}" for x in point.absorb_us)
        expand = " | ".join(f"{round(x):,}" for x in point.expand_us)
        prefix = point.prefix_len_tokens
        assert f"| {prefix:,} | absorb us | {absorb} | **{found[prefix]}** |" in doc
        assert f"| | expand us | {expand} | |" in doc


def test_doc_report_is_the_report_of_the_bundled_file() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kernels_calib", "report", "h200-measured", "--all", "--notes"],
        cwd=ROOT,
        env={"COLUMNS": "140", "PATH": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    doc = (ROOT / "docs" / "h200-measured.md").read_text()
    lines = [line.rstrip() for line in done.stdout.splitlines() if line.strip()]
    assert len(lines) > 40
    assert [line for line in lines if line not in doc] == []
