"""`mlasim validate` end to end on a tiny CSV: report files, coverage reasons, bad input."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from sim.cli import app
from sim.validate.rows import REQUIRED_COLUMNS
from tests.builders import MEASURED_ROW as BASE
from tests.builders import write_rows_csv as write_csv

runner = CliRunner()


def test_validate_writes_the_report_and_counts_every_row(tmp_path: Path) -> None:
    csv = write_csv(
        tmp_path / "rows.csv",
        [
            {**BASE, "id": "ep8", "isl": 256, "osl": 16},
            {
                **BASE,
                "id": "tp8",
                "isl": 256,
                "osl": 16,
                "moe_tp_size": 8,
                "moe_ep_size": 1,
                "silicon_tpot_ms": 15.0,
            },
            {**BASE, "id": "gb", "system": "gb300"},
            {**BASE, "id": "odd", "backend": "tgi"},
            {**BASE, "id": "bad", "silicon_ttft_ms": "n/a"},
        ],
    )
    out = tmp_path / "out"
    res = runner.invoke(
        app, ["validate", "--dataset", str(csv), "--backend", "serial", "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    s = json.loads((out / "summary.json").read_text())
    assert (s["rows"], s["simulated"]) == (5, 2)
    assert s["coverage"] == {
        "GPU system not in the catalog": 1,
        "unknown backend": 1,
        "malformed row": 1,
    }
    assert s["ranking"]["tpot_ms"]["pairs"] == 1
    md = (out / "report.md").read_text()
    assert "`bad`" in md and "silicon_ttft_ms" in md and "h200-trtllm" in md
    assert "plotly" in (out / "report.html").read_text().lower()
    assert len((out / "results.jsonl").read_text().splitlines()) == 2


def test_a_csv_missing_a_column_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    cols = tuple(c for c in REQUIRED_COLUMNS if c != "silicon_tpot_ms")
    csv = write_csv(tmp_path / "rows.csv", [BASE], cols)
    res = runner.invoke(app, ["validate", "--dataset", str(csv), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert "silicon_tpot_ms" in res.output


def test_an_unknown_backend_is_a_usage_error(tmp_path: Path) -> None:
    csv = write_csv(tmp_path / "rows.csv", [BASE])
    res = runner.invoke(app, ["validate", "--dataset", str(csv), "--backend", "slurm"])
    assert res.exit_code == 2 and "slurm" in res.output


def test_an_unknown_request_path_is_a_usage_error(tmp_path: Path) -> None:
    csv = write_csv(tmp_path / "rows.csv", [BASE])
    args = ["validate", "--dataset", str(csv), "--request-path", "client"]
    res = runner.invoke(app, [*args, "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "--request-path client: use none or engine" in res.output
