"""CUDA quick calibration (runs only where a CUDA GPU is visible)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernels_calib import cli
from sim.catalog.profiles import load_profile


@pytest.mark.gpu
def test_cuda_quick_calibration(tmp_path: Path) -> None:
    out = tmp_path / "gpu-quick.json"
    assert cli.main(["--device", "cuda", "--quick", "--out", str(out), "--no-progress"]) == 0
    profile = load_profile(str(out))
    ops = {t.op for t in profile.tables}
    assert {"mla_decode", "mla_prefill", "gemm", "moe_up", "mla_extend_absorb"} <= ops
    assert profile.device.gpu is not None and profile.device.driver
    assert profile.crossover and all(c.prefix_len_tokens > 0 for c in profile.crossover)
    assert not [n for n in profile.notes if "FAILED" in n]
