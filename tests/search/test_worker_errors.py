"""A user error inside a worker (process pool or Ray task) comes back as its message."""

from __future__ import annotations

import pickle
import sys
from types import ModuleType
from typing import Any

import pytest

from sim.search.backends import RayBackend, RunError, run_scenario_json
from tests.builders import TINY, tiny


def _too_tight() -> str:
    dep = TINY["deployments"][1] | {"mem_fraction": 0.3}
    return tiny(deployments=[dep]).model_dump_json()


def test_task_raises_a_plain_run_error_that_crosses_processes() -> None:
    with pytest.raises(RunError, match="deployment 'dp8_ep8' does not fit on h200") as info:
        run_scenario_json(_too_tight())
    again = pickle.loads(pickle.dumps(info.value))  # what a process pool does with it
    assert type(again) is RunError and str(again) == str(info.value)


def test_invalid_scenario_json_in_a_worker_names_the_field() -> None:
    bad = _too_tight().replace('"mem_fraction":0.3', '"mem_fraction":3.0')
    with pytest.raises(RunError, match=r"mem_fraction: Input should be less than or equal to 1"):
        run_scenario_json(bad)


class _TaskError(Exception):
    """Stands in for Ray's RayTaskError: the worker's exception is its `cause`."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"Traceback (most recent call last): ... {cause}")
        self.cause = cause


def test_ray_task_errors_are_unwrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    ray = ModuleType("ray")

    class Ref:
        def __init__(self, arg: str) -> None:
            self.arg = arg

    def get(ref: Ref) -> Any:
        try:
            return run_scenario_json(ref.arg)
        except RunError as exc:
            raise _TaskError(exc) from None

    ray.is_initialized = lambda: True  # type: ignore[attr-defined]
    ray.remote = lambda fn: type("T", (), {"remote": staticmethod(Ref)})  # type: ignore[attr-defined]
    ray.wait = lambda refs, num_returns: (refs[:1], refs[1:])  # type: ignore[attr-defined]
    ray.get = get  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray", ray)
    backend = RayBackend(address="ray://head:10001")
    scenario = tiny(deployments=[TINY["deployments"][1] | {"mem_fraction": 0.3}])
    with pytest.raises(RunError) as info:
        list(backend.run([scenario]))
    assert str(info.value).startswith("deployment 'dp8_ep8' does not fit on h200")
    assert "Traceback" not in str(info.value)
