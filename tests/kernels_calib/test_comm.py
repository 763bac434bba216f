"""Collectives: skipped without several GPUs; the worker itself runs over gloo on CPU."""

from __future__ import annotations

from kernels_calib import comm
from kernels_calib.runner import calibrate
from kernels_calib.timing import TimingConfig


def test_collectives_are_skipped_and_said_so_without_gpus() -> None:
    profile = calibrate(device="cpu", quick=True, ops=["comm"], show_progress=False)
    assert not profile.tables
    assert any("collectives need at least 2, not measured" in n for n in profile.notes)


def test_collective_worker_times_every_op_over_gloo() -> None:
    sizes = [1 << 12, 1 << 16]
    config = TimingConfig(warmup=1, runs=3, min_runs=3)
    samples = comm.measure(2, "gloo", sizes, config)
    assert set(samples) == set(comm.OPS)
    for op in comm.OPS:
        assert set(samples[op]) == set(sizes)
        assert all(len(v) == 3 and min(v) > 0 for v in samples[op].values())
