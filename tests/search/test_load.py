"""The load sweep: offered load scaled by factors, results per deployment sorted by load."""

from __future__ import annotations

import pytest

from sim.run import run_scenario
from sim.search.backends import SerialBackend
from sim.search.load import load_of, load_points, run_load_sweep
from tests.builders import TINY, tiny


def test_open_loop_scales_the_rate() -> None:
    points = load_points(tiny(), (0.5, 1.0, 2.0))
    assert [load for load, _ in points] == [2.0, 4.0, 8.0]
    assert [s.workload.rate_req_s for _, s in points] == [2.0, 4.0, 8.0]  # type: ignore[union-attr]


def test_closed_loop_scales_concurrency_and_trace_is_refused() -> None:
    closed = TINY["workload"] | {"kind": "closed", "concurrency_per_rank": 3}
    closed.pop("rate_req_s")
    sc = tiny(workload=closed)
    assert load_of(sc) == ("concurrency_per_rank", 3.0)
    assert [load for load, _ in load_points(sc, (0.1, 1.0, 2.0))] == [1.0, 3.0, 6.0]
    with pytest.raises(ValueError, match="not a trace"):
        load_of(tiny(workload={"kind": "trace", "path": "t.csv"}))
    with pytest.raises(ValueError, match="must be > 0"):
        load_points(tiny(), (0.0, 1.0))


def test_sweep_curves_are_sorted_by_offered_load_and_match_single_runs() -> None:
    done: list[int] = []
    curves = run_load_sweep(tiny(), (2.0, 0.5, 1.0), SerialBackend(), lambda k, n: done.append(k))
    assert done == [1, 2, 3] and list(curves) == ["tp8", "dp8_ep8"]
    for name, pts in curves.items():
        loads = [p["rate_req_s"] for p in pts]
        assert loads == sorted(loads) == [2.0, 4.0, 8.0]
        at_base = run_scenario(tiny()).deployment(name)
        assert pts[1]["output_tok_s_per_gpu"] == pytest.approx(at_base.output_tok_s_per_gpu)
        assert pts[1]["goodput_req_s"] == pytest.approx(at_base.goodput_req_s)
    tok = [p["output_tok_s_per_gpu"] for p in curves["dp8_ep8"]]
    assert tok[0] < tok[1] < tok[2]  # below saturation more load is more output
