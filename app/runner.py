"""Running scenarios from the app: one cached simulation per deployment, in worker processes.

A scenario is split into one single-deployment scenario per deployment (same workload, run and
seed): each deployment is simulated on its own anyway, so a part gives exactly what that deployment
gives in the whole scenario. Each part is cached by its canonical JSON, so editing one deployment
re-runs only that one, and the parts run side by side in worker processes. The script thread moves a
progress bar meanwhile: Streamlit elements cannot be touched from inside a cached function.
"""

from __future__ import annotations

import hashlib
import json
import queue
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

import streamlit as st

from app import workers
from sim.api import Results, resolve
from sim.specs.scenario import Scenario

POLL_S = 0.1


def _data(scenario: Scenario) -> dict[str, Any]:
    """The scenario as JSON data with every default spelled out, each deployment's checkpoint
    weights included (`resolve` writes them in; the run would use them anyway)."""
    return resolve(scenario, read_trace=False).scenario.model_dump(mode="json")


def canonical_json(scenario: Scenario) -> str:
    """The scenario as JSON with sorted keys and every default spelled out: the cache key."""
    return json.dumps(_data(scenario), sort_keys=True, separators=(",", ":"))


def content_hash(scenario: Scenario) -> str:
    return hashlib.sha256(canonical_json(scenario).encode()).hexdigest()[:12]


def split(scenario: Scenario) -> list[str]:
    """Canonical JSON of one single-deployment scenario per deployment, in order."""
    data = _data(scenario)
    return [
        json.dumps(data | {"deployments": [dep]}, sort_keys=True, separators=(",", ":"))
        for dep in data["deployments"]
    ]


def merge(parts: list[dict[str, Any]]) -> Results:
    """One `Results` from the single-deployment results, deployments in the parts' order."""
    first = Results.model_validate(parts[0])
    deployments = [d for p in parts for d in Results.model_validate(p).deployments]
    end_s = max(float(p["end_s"]) for p in parts)
    return first.model_copy(update={"deployments": deployments, "end_s": end_s})


@st.cache_resource
def pool() -> workers.Workers:
    """The app's worker processes, started with the server's first session."""
    return workers.start()


@st.cache_data(show_spinner=False, max_entries=256)
def _simulate(part_json: str, _workers: workers.Workers, _progress: Any) -> dict[str, Any]:
    return _workers.pool.submit(workers.simulate, part_json, _progress).result()


@dataclass(frozen=True)
class RunOutcome:
    results: Results
    samples: dict[str, dict[str, list[float]]]
    wall_s: float  # this call, cache hits included
    sim_wall_s: float  # the longest part's simulation, when it ran
    cached_parts: int
    scenario_hash: str

    @property
    def summary(self) -> str:
        n = len(self.results.deployments)
        return (
            f"scenario {self.scenario_hash} · {self.wall_s:.2f} s wall (longest simulation "
            f"{self.sim_wall_s:.2f} s) · {self.cached_parts} of {n} deployments from the cache"
        )


def _timed(part: str, w: workers.Workers, progress: Any) -> tuple[dict[str, Any], float]:
    start = time.perf_counter()
    data = _simulate(part, w, progress)
    return data, time.perf_counter() - start


def run(scenario: Scenario) -> RunOutcome:
    """Simulate (or fetch from the cache) with a status box and a progress bar.

    Raises what `run_scenario` raises (ValueError for a deployment that does not fit, ...).
    """
    parts = split(scenario)
    names = [d.name for d in scenario.deployments]
    w = pool()
    inbox = w.manager.Queue()
    done: dict[str, float] = {}
    t0 = time.perf_counter()
    with st.status(f"Simulating {', '.join(names)}", expanded=False) as box:
        bar = st.progress(0.0, text="starting")
        with ThreadPoolExecutor(max_workers=len(parts)) as threads:
            futures = [threads.submit(_timed, p, w, inbox) for p in parts]
            while not all(f.done() for f in futures):
                time.sleep(POLL_S)
                _drain(inbox, done)
                share = sum(done.values()) / len(names)
                bar.progress(min(share, 1.0), text=f"{share:.0%} of simulated time")
            try:
                outcomes = [f.result() for f in futures]
            except BrokenProcessPool:
                pool.clear()  # the next run starts fresh workers
                box.update(label="Run failed", state="error")
                raise RuntimeError(
                    "a worker process stopped (out of memory?); press Run again to restart them"
                ) from None
            except Exception:
                box.update(label="Run failed", state="error")
                raise
        wall = time.perf_counter() - t0
        cached = sum(elapsed < data["sim_wall_s"] for data, elapsed in outcomes)
        bar.progress(1.0, text="done")
        box.update(label=f"Simulated {len(names)} deployments in {wall:.2f} s", state="complete")
    samples = {k: v for data, _ in outcomes for k, v in data["samples"].items()}
    return RunOutcome(
        results=merge([data["results"] for data, _ in outcomes]),
        samples=samples,
        wall_s=wall,
        sim_wall_s=max(data["sim_wall_s"] for data, _ in outcomes),
        cached_parts=cached,
        scenario_hash=content_hash(scenario),
    )


def _drain(inbox: Any, done: dict[str, float]) -> None:
    while True:
        try:
            name, fraction = inbox.get_nowait()
        except queue.Empty:
            return
        done[name] = fraction
