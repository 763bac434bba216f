"""A run bounded only by `max_requests` (no simulated duration) still reports progress while it
goes, so the wall-time limit stops it with a clear error instead of letting it run unbounded."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sim.engine import run as engine_run
from sim.run import run_scenario
from sim.search.backends import RunError, run_scenario_json
from sim.specs.limits import LimitError, Limits, check_wall, wall_watch
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


def _no_wall_time_left(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_run, "EVENTS_PER_TICK", 64)
    import sim.specs.limits as limits

    monkeypatch.setattr(limits, "DEFAULT", Limits(name="default", max_wall_s=-1.0))
    monkeypatch.setitem(limits.SETS, "default", limits.DEFAULT)


def test_wall_watch_passes_each_tick_on_and_then_checks_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[str, float]] = []
    tick = wall_watch(lambda name, f: seen.append((name, f)))
    tick("a", 0.5)  # the default limit (an hour) is far away
    assert seen == [("a", 0.5)]
    _no_wall_time_left(monkeypatch)
    with pytest.raises(LimitError, match="deployment 'b': the simulation has run"):
        tick("b", 0.6)
    assert seen[-1] == ("b", 0.6)  # shown first, then stopped


def test_mlasim_check_and_the_app_stop_at_the_wall_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.workers import simulate
    from sim.cli.check import default_runner

    _no_wall_time_left(monkeypatch)
    scenario = _by_requests(100_000)
    with pytest.raises(LimitError, match="over the limit of -1 s"):
        default_runner(Path("by-requests.yaml"), yaml.safe_dump(scenario.model_dump(mode="json")))
    with pytest.raises(LimitError, match="over the limit of -1 s"):
        simulate(scenario.model_dump_json())


def test_watching_a_run_changes_none_of_its_results(monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress ticks come from inside the engine's event loop, not from events of their own:
    a run's results, its event count included, are the same watched or not."""
    monkeypatch.setattr(engine_run, "EVENTS_PER_TICK", 64)
    for scenario in (tiny(), _by_requests(300)):
        seen: dict[str, list[float]] = {}

        def show(name: str, f: float, seen: dict[str, list[float]] = seen) -> None:
            seen.setdefault(name, []).append(f)

        watched = run_scenario(scenario, progress=show)
        assert sorted(seen) == sorted(d.name for d in scenario.deployments)
        for fractions in seen.values():
            assert len(fractions) > 3 and fractions == sorted(fractions) and fractions[-1] == 1.0
        bare = run_scenario(scenario)
        assert watched == bare
        assert [d.sim_events for d in watched.deployments] == [
            d.sim_events for d in bare.deployments
        ]
