"""The `row_csv` fixture: a measured-rows CSV of `MEASURED_ROW` with per-row overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import MEASURED_ROW as BASE
from tests.builders import write_rows_csv as write_csv


@pytest.fixture
def row_csv(tmp_path: Path):
    def make(*overrides: dict[str, Any]) -> Path:
        return write_csv(tmp_path / "rows.csv", [{**BASE, **o} for o in overrides])

    return make
