"""Build the pools and lock-step units of one deployment from its spec and cost models.

- `Deployment` (role colocated): one pool; requests prefill then decode on the same rank.
- `Deployment` with role 'prefill' alone: requests finish with their first token.
- `Deployment` with role 'decode' alone: requests arrive with their prompt's KV in place.
- `PdDeployment`: a prefill pool feeding a decode pool through `KvTransfer`.
Each pool has `replicas` units of `attn_dp` attention ranks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import simpy

from sim.cost.batch import ServingCost
from sim.engine.arrivals import ClosedLoopFeed, ScheduledFeed, TransferFeed
from sim.engine.benchmark_feed import BenchmarkFeed
from sim.engine.mtp import DrawStream
from sim.engine.pd import KvTransfer
from sim.engine.pool import (
    AfterPrefill,
    Finished,
    Pool,
    PoolHooks,
    Refused,
    ignore_finished,
    ignore_refused,
)
from sim.engine.requests import RequestTable
from sim.engine.router import ROUTERS
from sim.engine.unit import Unit
from sim.specs.deployment import Deployment, PdDeployment

CostFactory = Callable[[Deployment], ServingCost]
EntryFeed = ScheduledFeed | ClosedLoopFeed | BenchmarkFeed


@dataclass
class Cluster:
    """Everything built for one deployment's run."""

    pools: list[Pool]
    units: list[Unit]
    entry: Pool  # the pool new requests arrive at
    exit: Pool  # the pool requests complete in
    transfer: KvTransfer | None


def entry_deployment(dep: Deployment | PdDeployment) -> Deployment:
    """The layout whose ranks receive new requests (closed-loop per-rank counts use it)."""
    return dep.prefill if isinstance(dep, PdDeployment) else dep


def _check_router(dep: Deployment, where: str) -> None:
    if dep.router not in ROUTERS:
        raise ValueError(
            f"{where}.router={dep.router!r} is unknown: known routers are "
            f"{', '.join(sorted(ROUTERS))}"
        )


def _pool(
    env: simpy.Environment,
    name: str,
    dep: Deployment,
    cost: ServingCost,
    table: RequestTable,
    feed: EntryFeed | TransferFeed,
    rng: np.random.Generator | DrawStream,
    after: AfterPrefill,
    hooks: PoolHooks,
    first_token_in_decode: bool = False,
) -> tuple[Pool, list[Unit]]:
    units: list[Unit] = []

    def make_unit(pool: Pool, index: int) -> Unit:
        units.append(Unit(env, pool, index, cost))
        return units[-1]

    pool = Pool(
        name=name, deployment=dep, cost=cost, table=table, feed=feed, rng=rng,
        after_prefill=after, make_unit=make_unit, hooks=hooks,
        first_token_in_decode=first_token_in_decode,
    )  # fmt: skip
    return pool, units


def _client(feed: EntryFeed, table: RequestTable) -> tuple[Finished, Refused]:
    """What the workload's client hears of its requests: a closed loop's user sends its next
    request when one finishes or is refused, a benchmark's slot frees; an open loop hears
    nothing."""
    if isinstance(feed, ClosedLoopFeed):
        closed = feed

        def release(ids: np.ndarray, now: float) -> None:
            closed.release(now, table.home_rank[ids])

        return release, closed.refused
    if isinstance(feed, BenchmarkFeed):
        return feed.finished, feed.refused
    return ignore_finished, ignore_refused


def build_cluster(
    env: simpy.Environment,
    dep: Deployment | PdDeployment,
    cost_for: CostFactory,
    table: RequestTable,
    feed: EntryFeed,
    rng: np.random.Generator,
    *,
    nic_gb_s: float,
) -> Cluster:
    """Pools and units for `dep`; the units' processes are started on `env`."""
    # the engine generator is only drawn from through one stream that both PD pools share
    draws: np.random.Generator | DrawStream = DrawStream(rng) if DrawStream.supports(rng) else rng
    # a request finishes in the exit pool, or in a prefill-only or PD prefill pool when its only
    # token came from prefill: every pool tells the client
    finished, refused = _client(feed, table)
    if isinstance(dep, PdDeployment):
        _check_router(dep.prefill, f"{dep.name}.prefill")
        _check_router(dep.decode, f"{dep.name}.decode")
        pre_cost, dec_cost = cost_for(dep.prefill), cost_for(dep.decode)
        xfeed = TransferFeed()
        gb_s = dep.kv_transfer_gb_s or nic_gb_s
        link = KvTransfer(
            table, xfeed, kv_bytes_per_token=pre_cost.kv_bytes_per_token,
            state_tokens=pre_cost.state_tokens_per_request, bandwidth_bytes_s=gb_s * 1e9,
        )  # fmt: skip
        dec, dec_units = _pool(
            env, "decode", dep.decode, dec_cost, table, xfeed, draws, "decode",
            PoolHooks(finished=finished, refused=refused), first_token_in_decode=True,
        )  # fmt: skip
        pre_hooks = PoolHooks(
            finished=finished, refused=refused, transfer=link.send, downstream_fits=dec.fits
        )
        pre, pre_units = _pool(
            env, "prefill", dep.prefill, pre_cost, table, feed, draws, "transfer", pre_hooks
        )
        cluster = Cluster(
            pools=[pre, dec], units=pre_units + dec_units, entry=pre, exit=dec, transfer=link
        )
    else:
        _check_router(dep, dep.name)
        after: AfterPrefill = "done" if dep.role == "prefill" else "decode"
        pool, units = _pool(
            env, dep.name, dep, cost_for(dep), table, feed, draws, after,
            PoolHooks(finished=finished, refused=refused),
            first_token_in_decode=dep.role == "decode",
        )  # fmt: skip
        cluster = Cluster(pools=[pool], units=units, entry=pool, exit=pool, transfer=None)
    for u in cluster.units:
        env.process(u.run())
    return cluster
