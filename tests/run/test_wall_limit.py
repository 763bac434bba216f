"""A run bounded only by `max_requests` (no simulated duration) still reports progress while it
goes, so the wall-time limit stops it with a clear error instead of letting it run unbounded."""

from __future__ import annotations

import pytest

from sim.engine import run as engine_run
from sim.run import run_scenario
from sim.search.backends import RunError, run_scenario_json
from sim.specs.limits import LimitError, Limits, check_wall
from sim.specs.scenario import Scenario
from tests.builders import TINY, tiny

CLOSED = {k: v for k, v in TINY["workload"].items() if k != "rate_req_s"} | {
    "kind": "closed",
    "concurrency": 8,
}


def _by_requests(n: int) -> Scenario:
    return tiny(deployments=TINY["deployments"][1:], workload=CLOSED, run={"max_requests": n})


def test_a_run_without_duration_reports_progress_as_requests_finish(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(engine_run, "EVENTS_PER_TICK", 64)
    seen: list[float] = []
    results = run_scenario(_by_requests(300), progress=lambda name, f: seen.append(f))
    assert results.deployments[0].requests.completed > 0
    assert len(seen) > 3 and seen[-1] == 1.0  # ticks during the run, then the end
    assert seen == sorted(seen) and 0.0 < seen[-2] < 1.0


def test_the_wall_limit_stops_a_run_bounded_only_by_max_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(engine_run, "EVENTS_PER_TICK", 64)
    none_left = Limits(name="test", max_wall_s=0.0)
    calls: list[float] = []

    def wall(name: str, fraction: float) -> None:
        calls.append(fraction)
        check_wall(1e-3, f"deployment {name!r}", none_left)  # any wall time is over this limit

    with pytest.raises(LimitError, match=r"deployment 'dp8_ep8': the simulation has run .* s of "
                       r"wall time, over the limit of 0 s; .*cap run.max_requests"):  # fmt: skip
        run_scenario(_by_requests(100_000), progress=wall)
    assert calls and calls[0] < 1.0  # stopped at the first tick, long before the end


def test_workers_check_the_wall_limit_on_such_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_run, "EVENTS_PER_TICK", 64)
    import sim.specs.limits as limits

    monkeypatch.setattr(limits, "DEFAULT", Limits(name="default", max_wall_s=-1.0))
    monkeypatch.setitem(limits.SETS, "default", limits.DEFAULT)
    with pytest.raises(RunError, match="over the limit of -1 s"):
        run_scenario_json(_by_requests(100_000).model_dump_json())
