"""Simulate one deployment under one workload: the engine's single entry point.

Randomness: one `SeedSequence(seed)` per run, split into a workload stream (arrival times and
lengths) and an engine stream (MTP acceptance). Under an open-loop or trace workload every
deployment of a scenario therefore sees exactly the same requests at the same times, whatever
its layout. A closed loop shares only the sequence of request lengths: each arrival follows a
completion of the deployment's own, and `concurrency_per_rank` scales the users with its ranks
(`attn_dp x replicas`). With `duration_s` every deployment's run ends at the same time; with
`max_requests` alone each ends at its own last event.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import simpy

from sim.cost.overheads import engine_overheads
from sim.engine.arrivals import Batch, ClosedLoopFeed, ScheduledFeed, open_loop
from sim.engine.benchmark_feed import BenchmarkFeed
from sim.engine.cluster import Cluster, CostFactory, build_cluster, entry_deployment
from sim.engine.invariants import RequestCounts, check_all
from sim.engine.lengths import cap_cached
from sim.engine.record import RunRecord, make_record
from sim.engine.requests import Phase, RequestTable
from sim.specs.deployment import Deployment, PdDeployment
from sim.specs.scenario import RunSpec
from sim.specs.workload import BenchmarkWorkload, ClosedWorkload, TraceWorkload, Workload

Progress = Callable[[float], None]


@dataclass(frozen=True)
class SimOutput:
    """A finished run: its plain `record` (what `sim.metrics` and the writers read), and the
    live request table and cluster (for the engine's own checks and tests)."""

    record: RunRecord
    table: RequestTable
    cluster: Cluster

    @property
    def deployment(self) -> Deployment | PdDeployment:
        return self.record.deployment

    @property
    def counts(self) -> RequestCounts:
        return self.record.counts

    @property
    def end_s(self) -> float:
        return self.record.end_s

    @property
    def warmup_s(self) -> float:
        return self.record.warmup_s

    @property
    def events(self) -> int:
        return self.record.events


def trace_batch(w: TraceWorkload, trace: Batch, run: RunSpec) -> Batch:
    """The trace's requests in arrival order, time-scaled and cut to the run's limits."""
    order = np.argsort(trace.arrival_s, kind="stable")
    t = trace.arrival_s[order] * w.time_scale
    inp = np.maximum(trace.input_tokens[order], 1)
    b = Batch(t, inp, np.maximum(trace.output_tokens[order], 1),
              cap_cached(trace.cached_tokens[order], inp))  # fmt: skip
    n = b.arrival_s.shape[0]
    if run.duration_s is not None:
        n = int(np.searchsorted(b.arrival_s, run.duration_s, side="left"))
    if run.max_requests is not None:
        n = min(n, run.max_requests)
    return b.head(n)


def make_feed(
    workload: Workload,
    rng: np.random.Generator,
    dep: Deployment | PdDeployment,
    run: RunSpec,
    trace: Batch | None,
) -> ScheduledFeed | ClosedLoopFeed | BenchmarkFeed:
    prefilled = isinstance(dep, Deployment) and dep.role == "decode"
    if isinstance(workload, BenchmarkWorkload):
        ingress_s = 0.0  # with `request_path: engine`, the engine's serving path after a send
        over = engine_overheads(entry_deployment(dep))
        if workload.request_path == "engine" and over is not None:
            ingress_s = over.request_path_ms.value * 1e-3
        return BenchmarkFeed(workload, rng, prefilled=prefilled, ingress_s=ingress_s)
    if isinstance(workload, TraceWorkload):
        if trace is None:
            raise ValueError(f"workload.path={workload.path!r}: the trace was not loaded")
        return ScheduledFeed(trace_batch(workload, trace, run), prefilled=prefilled)
    if isinstance(workload, ClosedWorkload):
        entry = entry_deployment(dep)
        ranks = entry.attn_dp * entry.replicas
        return ClosedLoopFeed(workload, rng, ranks, run.max_requests, prefilled=prefilled)
    batch = open_loop(workload, rng, run.duration_s, run.max_requests)
    return ScheduledFeed(batch, prefilled=prefilled)


class _CountingEnvironment(simpy.Environment):
    """A simpy Environment that counts the events it processes."""

    events_processed = 0

    def step(self) -> None:
        self.events_processed += 1
        super().step()


EVENTS_PER_TICK = 1024  # a run without duration_s reports progress every this many events
TICKS_PER_RUN = 100  # a run with duration_s reports progress at each hundredth of it


class _WatchedEnvironment(_CountingEnvironment):
    """Calls `tick` as the run goes, inside `step`, so watching adds no event of its own (a
    run's results, `sim_events` included, are the same watched or not): at each hundredth of
    `duration_s` of simulated time, or every EVENTS_PER_TICK events for a run with no
    `duration_s` (ended by `max_requests`), which has no simulated time to tick at."""

    def __init__(self, tick: Callable[[], None], duration_s: float | None) -> None:
        super().__init__()
        self.tick = tick
        self.every_s = None if duration_s is None else duration_s / TICKS_PER_RUN
        self.next_s = self.every_s

    def step(self) -> None:
        super().step()
        if self.every_s is None:
            if self.events_processed % EVENTS_PER_TICK == 0:
                self.tick()
        elif self.next_s is not None and self.now >= self.next_s:
            self.next_s = (math.floor(self.now / self.every_s) + 1) * self.every_s
            self.tick()


def _done_fraction(env: simpy.Environment, table: RequestTable, run: RunSpec) -> float:
    """Simulated time over `duration_s`, or requests done or rejected over `max_requests`;
    below 1 until the run has ended."""
    if run.duration_s is not None:
        return min(env.now / run.duration_s, 0.99)
    if not run.max_requests:
        return 0.0
    counts = table.phase_counts()
    ended = counts.get(Phase.DONE, 0) + counts.get(Phase.REJECTED, 0)
    return min(ended / run.max_requests, 0.99)


@contextmanager
def cycles_uncollected() -> Iterator[None]:
    """Pause the cyclic garbage collector (reference counting frees as usual), and restore it.

    A run's steps drop no reference cycles: after a 600-s colocated EP144 run with the collector
    off, `gc.collect()` finds nothing to free, and `tests/engine/test_no_cycles.py` holds
    several run kinds to garbage that does not grow with the run. Yet the collector, left on,
    keeps walking what the run keeps alive, the cost model's memos above all: 311k tracked
    objects by the end of that run, whose 5 full collections and ~700 younger ones took 0.31 s
    of its 2.6 s of CPU. A decode-only run keeps far fewer (79k objects; 1% of its CPU)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# One 400 Gb/s RDMA NIC per GPU, every catalog GPU's `nic_gb_s`; `sim.run` passes the GPU's own.
DEFAULT_NIC_GB_S = 50.0


def simulate(
    deployment: Deployment | PdDeployment,
    cost_for: CostFactory,
    workload: Workload,
    run: RunSpec,
    *,
    trace: Batch | None = None,
    nic_gb_s: float = DEFAULT_NIC_GB_S,
    progress: Progress | None = None,
) -> SimOutput:
    """Run one deployment to the end of `run` and check the invariants.

    `cost_for(d)` prices steps of layout `d` (both pools of a PD deployment call it). Raises
    `InvariantError` when the run ends in an inconsistent state. The cyclic garbage collector
    is paused meanwhile (`cycles_uncollected`).
    """
    with cycles_uncollected():
        return _simulate(deployment, cost_for, workload, run, trace, nic_gb_s, progress)


def _simulate(
    deployment: Deployment | PdDeployment,
    cost_for: CostFactory,
    workload: Workload,
    run: RunSpec,
    trace: Batch | None,
    nic_gb_s: float,
    progress: Progress | None,
) -> SimOutput:
    if progress is not None:
        env: _CountingEnvironment = _WatchedEnvironment(
            lambda: progress(_done_fraction(env, table, run)), run.duration_s
        )
    else:
        env = _CountingEnvironment()
    wl_seed, engine_seed = np.random.SeedSequence(run.seed).spawn(2)
    table = RequestTable()
    feed = make_feed(workload, np.random.default_rng(wl_seed), deployment, run, trace)
    cluster = build_cluster(
        env, deployment, cost_for, table, feed, np.random.default_rng(engine_seed),
        nic_gb_s=nic_gb_s,
    )  # fmt: skip
    env.run(until=run.duration_s)
    end_s = float(run.duration_s if run.duration_s is not None else env.now)
    for pool in cluster.pools:  # arrivals during the last, unfinished steps still count
        pool.deliver(end_s)
    for unit in cluster.units:
        unit.rs.sync(table)
    if progress is not None:
        progress(1.0)
    counts = check_all(cluster, table, feed.delivered, end_s)
    record = make_record(
        deployment, cluster, table, counts, end_s=end_s, warmup_s=run.warmup_s,
        events=env.events_processed,
    )  # fmt: skip
    return SimOutput(record=record, table=table, cluster=cluster)
