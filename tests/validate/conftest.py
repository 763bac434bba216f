"""Builders for validation tests: a measured-rows CSV written from a few hand-made rows."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from sim.validate.rows import REQUIRED_COLUMNS

BASE: dict[str, Any] = {
    "id": "r1",
    "silicon_data_source": "db-dump; config_id=1; silicon_concurrency=8; image",
    "backend": "trtllm",
    "backend_version": "1.1.0",
    "model_path": "deepseek-ai/DeepSeek-R1",
    "system": "h200_sxm",
    "precision": "fp8",
    "mode": "agg",
    "isl": 1024,
    "osl": 64,
    "gemm_quant_mode": "fp8",
    "moe_quant_mode": "fp8",
    "batch_size": 8,
    "tp_size": 8,
    "pp_size": 1,
    "attention_dp_size": 1,
    "moe_tp_size": 1,
    "moe_ep_size": 8,
    "silicon_ttft_ms": 400.0,
    "silicon_tpot_ms": 12.0,
}


def write_csv(path: Path, rows: list[dict[str, Any]], columns: tuple[str, ...] = REQUIRED_COLUMNS):
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c, "") for c in columns})
    return path


@pytest.fixture
def row_csv(tmp_path: Path):
    def make(*overrides: dict[str, Any]) -> Path:
        return write_csv(tmp_path / "rows.csv", [{**BASE, **o} for o in overrides])

    return make
