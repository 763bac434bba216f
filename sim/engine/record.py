"""A finished run as plain data: what `sim.metrics` and the file writers read.

`simulate` builds one `RunRecord` when a run ends. It holds the request table's columns (trimmed
to the run's requests, read-only), each pool's step log and the facts about the pool the
figures need (layout, KV pages, preemptions, the cost model's memory plan), and the run's
counts and times; no pool, unit, feed or cost model, so a reader cannot depend on the engine's
live state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from sim.engine.benchmark_feed import BenchmarkFeed
from sim.engine.invariants import RequestCounts
from sim.engine.log import StepLog
from sim.engine.requests import FloatArray, IntArray, RequestTable
from sim.specs.deployment import Deployment, PdDeployment

if TYPE_CHECKING:
    from sim.engine.cluster import Cluster
    from sim.engine.pool import Pool

# a cost model without a memory plan or a profile (a test's fixed-cost model) reports these
CUSTOM_PROFILE = "custom cost model"


def _frozen(a: NDArray[Any], n: int) -> NDArray[Any]:
    v = a[:n]
    v.flags.writeable = False
    return v


@dataclass(frozen=True, kw_only=True)
class RequestRecord:
    """Every arrived request's columns at the end of the run; row index = request id."""

    phase: NDArray[np.int8]
    arrival_s: FloatArray
    first_token_s: FloatArray  # NaN: no first token
    finish_s: FloatArray  # NaN: unfinished
    input_tokens: IntArray
    output_tokens: IntArray
    cached_tokens: IntArray
    generated: IntArray
    preemptions: IntArray
    rank: IntArray  # the rank it was on last (-1: never reached one)

    @property
    def size(self) -> int:
        return int(self.phase.shape[0])

    @classmethod
    def of(cls, t: RequestTable) -> RequestRecord:
        """Read-only views of `t`'s columns (no copy: the table no longer changes)."""
        n = t.size
        return cls(
            phase=_frozen(t.phase, n), arrival_s=_frozen(t.arrival_s, n),
            first_token_s=_frozen(t.first_token_s, n), finish_s=_frozen(t.finish_s, n),
            input_tokens=_frozen(t.input_tokens, n), output_tokens=_frozen(t.output_tokens, n),
            cached_tokens=_frozen(t.cached_tokens, n), generated=_frozen(t.generated, n),
            preemptions=_frozen(t.preemptions, n), rank=_frozen(t.rank, n),
        )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class MemoryFacts:
    """The cost model's memory plan of one pool's GPUs (None each where it has none)."""

    kv_dup_factor: float | None
    kv_bytes_per_token_per_gpu: float | None
    kv_capacity_tokens_per_gpu: int | None

    @classmethod
    def of(cls, cost: object) -> MemoryFacts:
        # `ServingCost` (the engine's contract) does not require a memory plan: a fixed-cost
        # model has none, `sim.cost.serving.ServingCostModel` carries one as `memory`
        mem = getattr(cost, "memory", None)
        return cls(
            kv_dup_factor=getattr(mem, "kv_dup_factor", None),
            kv_bytes_per_token_per_gpu=getattr(mem, "kv_bytes_per_token_per_gpu", None),
            kv_capacity_tokens_per_gpu=getattr(mem, "kv_capacity_tokens_per_gpu", None),
        )


@dataclass(frozen=True, kw_only=True)
class PoolRecord:
    """One pool at the end of the run: its layout, step log and counters."""

    name: str
    role: str  # 'colocated', 'prefill' or 'decode'
    deployment: Deployment
    units: int
    ranks_per_unit: int
    log: StepLog  # complete: nothing appends to it after the run
    # (log index of the step, gaps) of tokens that came after sitting steps out: ITL
    late_gaps: tuple[tuple[int, FloatArray], ...]
    kv_capacity_pages: int  # per rank
    kv_page_tokens: int
    kv_peak_pages: int  # the most pages one rank held
    preempted: int  # recompute preemptions in the whole run
    memory: MemoryFacts
    launch_source: str | None = None  # the per-kernel launch figure and its source

    @classmethod
    def of(cls, pool: Pool, role: str) -> PoolRecord:
        return cls(
            name=pool.name, role=role, deployment=pool.deployment, units=pool.num_units,
            ranks_per_unit=pool.ranks_per_unit, log=pool.log, late_gaps=tuple(pool.late_gaps),
            kv_capacity_pages=pool.kv.capacity_pages, kv_page_tokens=pool.kv.page_tokens,
            kv_peak_pages=pool.kv.peak_pages, preempted=pool.preempted,
            memory=MemoryFacts.of(pool.cost), launch_source=launch_source(pool.cost),
        )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class BenchmarkFacts:
    """A benchmark client's run: which requests were its warm-up, when it started timing."""

    warmup_requests: int  # request ids below this were the warm-up
    start_s: float | None  # None: the warm-up never finished
    egress_s: float  # the client reads a token this long after the engine emits it


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """One deployment's finished run."""

    deployment: Deployment | PdDeployment
    requests: RequestRecord
    pools: tuple[PoolRecord, ...]  # entry pool first; the last is where requests complete
    counts: RequestCounts
    end_s: float
    warmup_s: float
    events: int  # simpy events processed (steps, sleeps, wake-ups)
    profile: str  # the entry pool's cost model's profile name
    kv_transfers: int  # PD hand-offs that arrived (0 without a transfer link)
    kv_transfer_total_s: float  # their hand-off to arrival times, summed
    benchmark: BenchmarkFacts | None  # None unless the workload is a benchmark client


def _roles(dep: Deployment | PdDeployment, pools: Sequence[Pool]) -> list[str]:
    if isinstance(dep, PdDeployment):
        return [p.name for p in pools]
    return [p.deployment.role for p in pools]


def make_record(
    dep: Deployment | PdDeployment,
    cluster: Cluster,
    table: RequestTable,
    counts: RequestCounts,
    *,
    end_s: float,
    warmup_s: float,
    events: int,
) -> RunRecord:
    """The plain record of a run that has ended."""
    feed, link = cluster.entry.feed, cluster.transfer
    bench = (
        BenchmarkFacts(
            warmup_requests=feed.warmup, start_s=feed.bench_start_s, egress_s=feed.egress_s
        )
        if isinstance(feed, BenchmarkFeed)
        else None
    )
    pools = tuple(
        PoolRecord.of(p, role)
        for p, role in zip(cluster.pools, _roles(dep, cluster.pools), strict=True)
    )
    return RunRecord(
        deployment=dep, requests=RequestRecord.of(table), pools=pools, counts=counts,
        end_s=end_s, warmup_s=warmup_s, events=events,
        profile=str(getattr(cluster.entry.cost, "profile_name", CUSTOM_PROFILE)),
        kv_transfers=link.sent if link else 0,
        kv_transfer_total_s=link.total_s if link else 0.0,
        benchmark=bench,
    )  # fmt: skip


def launch_source(cost: object) -> str | None:
    """The cost model's launch figure for roofline-priced kernels, with its source (a
    fixed-cost model has none; `sim.cost.serving.ServingCostModel.launch`)."""
    launch = getattr(cost, "launch", None)
    return None if launch is None else f"{launch.value:.3g} us a kernel: {launch.source}"
