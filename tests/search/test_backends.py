"""Backends: the same results in process and in a pool; Ray's absence explained; the Ray path
driven through a stand-in module that runs each task in process."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from sim.search.backends import (
    BackendError,
    ProcessBackend,
    RayBackend,
    SerialBackend,
    make_backend,
    run_all,
)
from sim.specs.scenario import Scenario
from tests.builders import tiny


def _points() -> list[Scenario]:
    return [tiny(workload=tiny().workload.model_dump() | {"rate_req_s": r}) for r in (2.0, 6.0)]


def test_serial_and_process_give_identical_results() -> None:
    points = _points()
    seen: list[tuple[int, int]] = []
    with SerialBackend() as serial:
        one = run_all(serial, points, lambda done, n: seen.append((done, n)))
    assert seen == [(1, 2), (2, 2)]
    with make_backend("process", jobs=2) as pool:
        two = run_all(pool, points)
        assert len(list(pool.run(points[:1]))) == 1  # the pool is reused across runs
    assert one == two
    assert [r["deployments"][0]["requests"]["arrived"] for r in one] != [0, 0]
    a, b = (r["deployments"][1]["requests"]["arrived"] for r in one)
    assert b > a  # the points really differ in load


def test_registry_rejects_unknown_names_and_bad_options() -> None:
    with pytest.raises(BackendError, match="unknown backend 'dask': known backends are process, "):
        make_backend("dask")
    with pytest.raises(BackendError, match="jobs=0"):
        make_backend("process", jobs=0)
    assert isinstance(make_backend("serial"), SerialBackend)
    assert isinstance(make_backend("process", jobs=1), ProcessBackend)


def test_ray_missing_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(BackendError, match=r"pip install 'mlasim\[dist\]'"):
        make_backend("ray")


class _Ref:
    def __init__(self, value: Any) -> None:
        self.value = value


def _stand_in_ray(calls: dict[str, Any]) -> ModuleType:
    """The few `ray` calls RayBackend makes; each task runs at once in this process."""
    ray = ModuleType("ray")
    state = {"up": False}

    def init(address: str | None = None) -> None:
        calls["address"], state["up"] = address, True

    def remote(fn: Callable[[str], Any]) -> Any:
        calls["task"] = fn
        return type("Task", (), {"remote": staticmethod(lambda arg: _Ref(fn(arg)))})

    def wait(refs: list[_Ref], num_returns: int) -> tuple[list[_Ref], list[_Ref]]:
        ready = refs[::-1][:num_returns]  # out of order, as a cluster may finish them
        return ready, [r for r in refs if r not in ready]

    ray.init = init  # type: ignore[attr-defined]
    ray.is_initialized = lambda: state["up"]  # type: ignore[attr-defined]
    ray.remote = remote  # type: ignore[attr-defined]
    ray.wait = wait  # type: ignore[attr-defined]
    ray.get = lambda ref: ref.value  # type: ignore[attr-defined]
    ray.shutdown = lambda: calls.setdefault("shutdown", True)  # type: ignore[attr-defined]
    return ray


def test_ray_path_runs_the_process_task(monkeypatch: pytest.MonkeyPatch) -> None:
    from sim.search.backends import run_scenario_json

    calls: dict[str, Any] = {}
    monkeypatch.setitem(sys.modules, "ray", _stand_in_ray(calls))
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")
    points = _points()
    with make_backend("ray") as ray_backend:
        assert isinstance(ray_backend, RayBackend)
        order = [i for i, _ in ray_backend.run(points)]
        got = run_all(ray_backend, points)
    assert order == [1, 0]
    assert calls["address"] == "ray://head:10001" and calls["task"] is run_scenario_json
    assert calls["shutdown"] is True
    assert got == run_all(SerialBackend(), points)
    monkeypatch.delenv("RAY_ADDRESS")
    assert RayBackend(address="auto").address == "auto"
