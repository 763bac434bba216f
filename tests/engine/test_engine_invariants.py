"""The end-of-run checks catch broken bookkeeping, and trace files are validated at the edge."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.engine.invariants import (
    InvariantError,
    check_kv,
    check_time,
    check_tokens,
    count_requests,
)
from sim.io.workload_csv import TraceError, read_trace
from tests.builders import unit
from tests.engine.fixed_cost import FixedCost, requests, run_trace


def _finished_run():  # type: ignore[no-untyped-def]
    return run_trace(unit(ranks=2), FixedCost(), requests((0.0, 100, 5), (0.1, 50, 5)),
                     duration_s=0.05)  # fmt: skip


def test_lost_request_is_caught() -> None:
    out = _finished_run()
    with pytest.raises(InvariantError, match="lost or duplicated"):
        count_requests(out.cluster, out.table, out.counts.arrived + 1)


def test_kv_counter_drift_is_caught() -> None:
    out = _finished_run()
    out.cluster.pools[0].kv.used[0] += 1
    with pytest.raises(InvariantError, match="KV page counters"):
        check_kv(out.cluster, out.table)


def test_step_past_the_end_is_caught() -> None:
    out = _finished_run()
    with pytest.raises(InvariantError, match="after the run"):
        check_time(out.cluster, end_s=0.001)


def test_token_drift_is_caught() -> None:
    out = _finished_run()
    check_tokens(out.cluster, out.table)  # the run itself is consistent
    out.table.generated[0] += 1
    with pytest.raises(InvariantError, match="output tokens"):
        check_tokens(out.cluster, out.table)


def test_trace_csv_reads_and_reports_bad_rows(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,input_tokens,output_tokens,cached_tokens\n0.5,100,10,20\n0.1,50,5,\n")
    b = read_trace(p)
    assert b.input_tokens.tolist() == [100, 50] and b.cached_tokens.tolist() == [20, 0]
    p.write_text("arrival_s,input_tokens,output_tokens\n0.5,100,10\n0.7,abc,3\n")
    with pytest.raises(TraceError, match=r"t.csv:3: input_tokens='abc' is not a number"):
        read_trace(p)
    p.write_text("arrival_s,input_tokens\n0.5,100\n")
    with pytest.raises(TraceError, match="lacks output_tokens"):
        read_trace(p)
