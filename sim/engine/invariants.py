"""Checks run at the end of every simulation; any failure raises `InvariantError`.

- No request lost or duplicated: arrived = completed + running + queued + rejected, where each
  term is counted by the component that holds the requests and must also match the phases in the
  request table.
- KV in use never above capacity (high-water mark), and the pools' page counters equal the pages
  the requests on each rank hold.
- Router load counters equal the work actually left on each rank.
- Each unit's running-set counters (requests per rank, requests in prefill) and derived columns
  (KV tokens, page room) equal a fresh count from the requests it holds.
- Simulated time only moved forward: each unit's steps start in order and never overlap.
- Tokens: the steps' logged output tokens add up to the tokens the requests hold; no request
  holds more than it asked for, a finished one all of them (one, in a prefill-only pool), its
  first token no later than its last.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.engine.cluster import Cluster
from sim.engine.requests import EngineError, Phase, RequestTable


class InvariantError(EngineError):
    """A run finished in a state that breaks one of the simulator's invariants."""


@dataclass(frozen=True)
class RequestCounts:
    arrived: int
    completed: int
    running: int  # prefill, decode, or KV in transfer
    queued: int
    rejected: int


def count_requests(cluster: Cluster, table: RequestTable, arrived: int) -> RequestCounts:
    """Counts from the components (queues, units, transfers), cross-checked with the table."""
    running = sum(int(u.running.shape[0]) for u in cluster.units)
    in_flight = cluster.transfer.feed.in_flight if cluster.transfer else 0
    c = RequestCounts(
        arrived=arrived,
        completed=sum(p.completed for p in cluster.pools),
        running=running + in_flight,
        queued=sum(p.queues.total for p in cluster.pools),
        rejected=sum(p.rejected for p in cluster.pools),
    )
    total = c.completed + c.running + c.queued + c.rejected
    if c.arrived != total or table.size != c.arrived:
        raise InvariantError(
            f"requests lost or duplicated: arrived {c.arrived} (table {table.size}) != completed "
            f"{c.completed} + running {c.running} + queued {c.queued} + rejected {c.rejected}"
        )
    ph = table.phase_counts()
    expect = {
        Phase.DONE: c.completed,
        Phase.REJECTED: c.rejected,
        Phase.QUEUED: c.queued,
        Phase.TRANSFER: in_flight,
    }
    for phase, n in expect.items():
        if ph[phase] != n:
            raise InvariantError(f"{ph[phase]} requests are {phase.name} but {n} were counted")
    if ph[Phase.PREFILL] + ph[Phase.DECODE] != running:
        raise InvariantError(
            f"{ph[Phase.PREFILL] + ph[Phase.DECODE]} requests are in PREFILL/DECODE but the "
            f"units hold {running}"
        )
    return c


def check_kv(cluster: Cluster, table: RequestTable) -> None:
    for pool in cluster.pools:
        ids = [u.running for u in cluster.units if u.pool is pool]
        held = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
        used = np.bincount(table.rank[held], weights=table.kv_pages[held], minlength=pool.num_ranks)
        if not np.array_equal(used.astype(np.int64), pool.kv.used):
            raise InvariantError(f"{pool.name}: KV page counters disagree with the requests held")
        if pool.kv.peak_pages > pool.kv.capacity_pages:
            raise InvariantError(
                f"{pool.name}: KV in use reached {pool.kv.peak_pages} pages, above the "
                f"capacity {pool.kv.capacity_pages}"
            )
        queued = table.phase[: table.size] == Phase.QUEUED
        on_pool = np.zeros(table.size, dtype=bool)
        on_pool[held] = True
        for r in range(pool.num_ranks):
            for i in pool.queues.ids(r):
                on_pool[i] = queued[i]
        mine = np.flatnonzero(on_pool)
        left = np.bincount(
            table.rank[mine], weights=table.remaining_tokens(mine), minlength=pool.num_ranks
        )
        if not np.array_equal(left.astype(np.int64), pool.work_left()):
            raise InvariantError(f"{pool.name}: router load counters disagree with work left")
        if not np.array_equal(
            np.bincount(table.rank[mine], minlength=pool.num_ranks), pool.assigned
        ):
            raise InvariantError(f"{pool.name}: router request counters disagree with the requests")


def check_running(cluster: Cluster, table: RequestTable) -> None:
    """Each unit's running-set counters and derived columns equal a fresh recount."""
    for u in cluster.units:
        rs, pool = u.rs, u.pool
        name = f"{pool.name} unit {u.index}"
        if not np.array_equal(rs.per_rank, np.bincount(rs.rank, minlength=pool.ranks_per_unit)):
            raise InvariantError(f"{name}: per-rank request counts disagree with the requests")
        if rs.n_prefill != int((~rs.is_decode).sum()):
            raise InvariantError(f"{name}: the count of requests in prefill is off")
        kv = pool.kv
        if not np.array_equal(rs.room, rs.pages * kv.page_tokens - kv.state_tokens):
            raise InvariantError(f"{name}: the room of the requests' KV pages is off")
        ids, dec = rs.ids, rs.is_decode  # generated tokens were synced from `left`
        ctx = table.input_tokens[ids] + table.generated[ids] + pool.draft_tokens
        if not np.array_equal(rs.kv[dec], ctx[dec]):
            raise InvariantError(f"{name}: running requests' KV tokens disagree with the table")


def check_time(cluster: Cluster, end_s: float) -> None:
    for pool in cluster.pools:
        log = pool.log
        unit, start, dur = log.column("unit"), log.column("start_s"), log.column("duration_s")
        if (dur <= 0).any():
            raise InvariantError(f"{pool.name}: a step has a non-positive duration")
        for u in range(pool.num_units):
            s, d = start[unit == u], dur[unit == u]
            if (np.diff(s) < 0).any() or (s[1:] < (s + d)[:-1] - 1e-9).any():
                raise InvariantError(f"{pool.name} unit {u}: steps overlap or go back in time")
            if s.size and s[-1] + d[-1] > end_s + 1e-9:
                raise InvariantError(f"{pool.name} unit {u}: a logged step ends after the run")


def check_tokens(cluster: Cluster, table: RequestTable) -> None:
    n = table.size
    logged = sum(int(pool.log.column("output_tokens").sum()) for pool in cluster.pools)
    if logged != int(table.generated[:n].sum()):
        raise InvariantError(
            f"steps logged {logged} output tokens, requests hold {int(table.generated[:n].sum())}"
        )
    done = table.phase[:n] == Phase.DONE
    generated, wanted = table.generated[:n], table.output_tokens[:n]
    if (generated > wanted).any():
        raise InvariantError("a request has more output tokens than it asked for")
    ends_at_first_token = cluster.pools[-1].deployment.role == "prefill"
    if not ends_at_first_token and (generated[done] != wanted[done]).any():
        raise InvariantError("a finished request is missing output tokens")
    if (table.first_token_s[:n][done] > table.finish_s[:n][done]).any():
        raise InvariantError("a finished request's first token comes after its last")


def check_all(cluster: Cluster, table: RequestTable, arrived: int, end_s: float) -> RequestCounts:
    counts = count_requests(cluster, table, arrived)
    check_tokens(cluster, table)
    check_kv(cluster, table)
    check_running(cluster, table)
    check_time(cluster, end_s)
    return counts
