from pathlib import Path

import pytest

from sim.validate.rows import REQUIRED_COLUMNS, RowsError, closed_loop_tok_s, read_rows
from tests.builders import MEASURED_ROW as BASE
from tests.builders import write_rows_csv as write_csv


def test_a_missing_column_is_named(tmp_path: Path) -> None:
    cols = tuple(c for c in REQUIRED_COLUMNS if c != "moe_ep_size")
    path = write_csv(tmp_path / "x.csv", [BASE], cols)
    with pytest.raises(RowsError, match="missing column moe_ep_size"):
        read_rows(path)


def test_a_malformed_row_is_reported_with_its_id(row_csv) -> None:
    rows, bad = read_rows(
        row_csv(
            {}, {"id": "bad1", "isl": "abc"}, {"id": "bad2", "silicon_data_source": "no figure"}
        )
    )
    assert [r.id for r in rows] == ["r1"]
    assert [b.id for b in bad] == ["bad1", "bad2"]
    assert "isl" in bad[0].problem and "silicon_concurrency" in bad[1].problem


def test_a_row_reads_its_concurrency_and_figures(row_csv) -> None:
    [r], _ = read_rows(row_csv({}))
    assert (r.concurrency, r.isl, r.osl, r.agg.tp_size, r.agg.moe_ep_size) == (8, 1024, 64, 8, 8)
    assert r.prefill.num_workers is None
    # 8 users, each request 0.4 s + 63 x 12 ms = 1.156 s for 64 tokens
    assert r.measured_tok_s == pytest.approx(8 * 64 / 1.156)
    assert closed_loop_tok_s(1, 1, 1000.0, 5.0) == pytest.approx(1.0)
