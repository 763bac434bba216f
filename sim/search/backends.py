"""Executors that run many scenarios: in this process, in a local process pool, or on Ray.

Every backend has one interface: `run(scenarios, progress)` yields `(index, results)` as each
scenario finishes (in completion order), where `results` is the JSON contract of `Results` as a
plain dict. Backends are context managers: a pool or a Ray connection opened by the first `run`
is reused by later ones (a capacity search runs many rounds) and released on exit.

Across processes only JSON strings go out and plain dicts come back: the task function of the
process and Ray backends is the same `run_scenario_json`. A user error in a worker (a deployment
that does not fit, a bad trace) comes back as a `RunError` carrying only its message, so the
caller reports it like the same error in its own process.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, as_completed
from types import ModuleType, TracebackType
from typing import Any, Protocol

from pydantic import ValidationError

from sim.specs.scenario import Scenario

ProgressFn = Callable[[int, int], None]  # (scenarios finished, scenarios in this run)
ERROR_KEY = "error"  # keep_going: a failed scenario's result is {"error": message}
RAY_INSTALL_HINT = "pip install 'mlasim[dist]'"


class BackendError(ValueError):
    """A backend that cannot be made: unknown name, bad option, or Ray not installed."""


class RunError(ValueError):
    """A scenario that failed on its inputs in a worker; the message is the original one."""


def run_scenario_json(scenario_json: str) -> dict[str, Any]:
    """The task every worker runs: scenario JSON in, results JSON dict out.

    Raises RunError with the message of any ValueError (pydantic's, the cost model's, a
    trace's): a plain exception with one string argument crosses a process boundary intact.
    """
    from sim.io.results_io import results_dict
    from sim.run import run_scenario
    from sim.specs.base import error_lines
    from sim.specs.limits import wall_watch

    try:
        scenario = Scenario.model_validate_json(scenario_json)
        results = run_scenario(scenario, progress=wall_watch())  # wall limit at every tick
        return results_dict(results)  # JSON-safe: no NaN or inf
    except ValidationError as exc:
        raise RunError("; ".join(error_lines(exc))) from None
    except ValueError as exc:
        raise RunError(str(exc)) from None


PR_SET_PDEATHSIG = 1  # linux/prctl.h
PARENT_POLL_S = 1.0


def die_with_parent(parent_pid: int) -> None:
    """Pool-worker initializer: the worker ends when the process that started it does, even if
    that one was SIGKILLed (no cleanup ran). Linux: the kernel sends SIGKILL on the parent's
    death (prctl PR_SET_PDEATHSIG); elsewhere, and as a backstop, a daemon thread polls the
    parent pid."""
    import signal
    import threading

    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:  # the parent died before the call above took effect
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(PARENT_POLL_S)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


class Backend(Protocol):
    name: str

    def run(
        self,
        scenarios: Sequence[Scenario],
        progress: ProgressFn | None = None,
        keep_going: bool = False,
    ) -> Iterator[tuple[int, dict[str, Any]]]: ...

    def close(self) -> None: ...

    def __enter__(self) -> Backend: ...

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None: ...


class _Closing:
    def close(self) -> None:
        """Release the pool or connection (safe to call twice)."""

    def __enter__(self) -> Any:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _tick(progress: ProgressFn | None, done: int, total: int) -> None:
    if progress is not None:
        progress(done, total)


class SerialBackend(_Closing):
    """One scenario after another in this process (debugging, tiny sweeps)."""

    name = "serial"

    def run(
        self,
        scenarios: Sequence[Scenario],
        progress: ProgressFn | None = None,
        keep_going: bool = False,
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        for i, sc in enumerate(scenarios):
            try:
                result = run_scenario_json(sc.model_dump_json())
            except RunError as exc:
                if not keep_going:
                    raise
                result = {ERROR_KEY: str(exc)}
            _tick(progress, i + 1, len(scenarios))
            yield i, result


class ProcessBackend(_Closing):
    """A local pool of `jobs` worker processes ('spawn': safe beside threads such as a progress
    bar or a web server). An `executor` passed in (the app's warmed-up pool) is used as is and
    left open on close."""

    name = "process"

    def __init__(self, jobs: int | None = None, executor: Executor | None = None) -> None:
        if jobs is not None and jobs < 1:
            raise BackendError(f"jobs={jobs}: give at least 1 worker process")
        self.jobs = jobs or max(1, os.cpu_count() or 1)
        self._executor, self._owned = executor, executor is None

    def _pool(self) -> Executor:
        if self._executor is None:
            ctx = multiprocessing.get_context("spawn")
            self._executor = ProcessPoolExecutor(
                max_workers=self.jobs, mp_context=ctx, initializer=die_with_parent,
                initargs=(os.getpid(),),
            )  # fmt: skip
        return self._executor

    def run(
        self,
        scenarios: Sequence[Scenario],
        progress: ProgressFn | None = None,
        keep_going: bool = False,
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        pool = self._pool()
        futures: dict[Future[dict[str, Any]], int] = {
            pool.submit(run_scenario_json, sc.model_dump_json()): i
            for i, sc in enumerate(scenarios)
        }
        try:
            for done, fut in enumerate(as_completed(futures), start=1):
                try:
                    result = fut.result()
                except RunError as exc:  # a dead worker (BrokenProcessPool) still raises
                    if not keep_going:
                        raise
                    result = {ERROR_KEY: str(exc)}
                _tick(progress, done, len(scenarios))
                yield futures[fut], result
        finally:
            for fut in futures:
                fut.cancel()  # a failed point or an abandoned loop leaves no queued work

    def close(self) -> None:
        if self._owned and self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None


def import_ray() -> ModuleType:
    """The `ray` module, or BackendError telling how to install it."""
    try:
        import ray
    except ImportError:
        raise BackendError(
            f"the 'ray' backend needs Ray, which is not installed: {RAY_INSTALL_HINT} "
            "(or use --backend process on one machine)"
        ) from None
    return ray


class RayBackend(_Closing):
    """One Ray task per scenario on the cluster at `address` (default: $RAY_ADDRESS, else a
    local Ray started for this run). Each task runs `run_scenario_json`."""

    name = "ray"

    def __init__(self, address: str | None = None) -> None:
        self.ray = import_ray()
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        self._task: Any = None
        self._started = False

    def _remote(self) -> Any:
        if self._task is None:
            if not self.ray.is_initialized():
                self.ray.init(address=self.address)
                self._started = True
            self._task = self.ray.remote(run_scenario_json)
        return self._task

    def run(
        self,
        scenarios: Sequence[Scenario],
        progress: ProgressFn | None = None,
        keep_going: bool = False,
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        task = self._remote()
        refs = {task.remote(sc.model_dump_json()): i for i, sc in enumerate(scenarios)}
        pending, done = list(refs), 0
        while pending:
            ready, pending = self.ray.wait(pending, num_returns=1)
            for ref in ready:
                done += 1
                try:
                    result = self._get(ref)
                except RunError as exc:
                    if not keep_going:
                        raise
                    result = {ERROR_KEY: str(exc)}
                _tick(progress, done, len(scenarios))
                yield refs[ref], result

    def _get(self, ref: Any) -> dict[str, Any]:
        """The task's result; a RunError raised in the task is raised here as itself (Ray
        wraps it in a RayTaskError whose message holds the remote traceback)."""
        try:
            result: dict[str, Any] = self.ray.get(ref)
        except Exception as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, RunError):
                raise RunError(str(cause)) from None
            raise
        return result

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()
            self._started = False
        self._task = None


def _process(jobs: int | None, ray_address: str | None) -> Backend:
    return ProcessBackend(jobs=jobs)


def _serial(jobs: int | None, ray_address: str | None) -> Backend:
    return SerialBackend()


def _ray(jobs: int | None, ray_address: str | None) -> Backend:
    return RayBackend(address=ray_address)


# name -> factory(jobs, ray_address); the first is the default
BACKENDS: dict[str, Callable[[int | None, str | None], Backend]] = {
    "process": _process,
    "serial": _serial,
    "ray": _ray,
}


def make_backend(name: str, *, jobs: int | None = None, ray_address: str | None = None) -> Backend:
    """A backend by name; BackendError for an unknown name (listing the known ones), a bad
    option, or Ray missing."""
    if name not in BACKENDS:
        raise BackendError(f"unknown backend {name!r}: known backends are {', '.join(BACKENDS)}")
    return BACKENDS[name](jobs, ray_address)


def run_all(
    backend: Backend, scenarios: Sequence[Scenario], progress: ProgressFn | None = None
) -> list[dict[str, Any]]:
    """Every scenario's results, in the order given."""
    out: list[dict[str, Any] | None] = [None] * len(scenarios)
    for i, result in backend.run(scenarios, progress):
        out[i] = result
    return [r for r in out if r is not None]
