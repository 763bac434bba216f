"""A lock-step unit: the ranks of one EP group (or one TP group) stepping together.

One simpy timeout per forward step. At each step boundary the unit routes new arrivals (its
pool's feed), plans one batch over all its ranks (idle ranks still join the step), asks the cost
model for the step's duration, waits that long, then applies the step. When none of its ranks has
anything to do it sleeps until the feed's next arrival or until the pool routes it a request.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from typing import Any

import simpy

from sim.cost.batch import ServingCost
from sim.engine.pool import Pool
from sim.engine.requests import EngineError, IntArray
from sim.engine.running import RunningSet
from sim.engine.scheduler import plan
from sim.engine.step import apply_step


class Unit:
    """One replica of a pool's lock-step group, run as a simpy process."""

    def __init__(self, env: simpy.Environment, pool: Pool, index: int, cost: ServingCost) -> None:
        self.env, self.pool, self.index, self.cost = env, pool, index, cost
        self.rs = RunningSet(
            pool.ranks_per_unit, draft_tokens=pool.draft_tokens, page_tokens=pool.kv.page_tokens,
            state_tokens=pool.kv.state_tokens,
        )  # fmt: skip
        self.steps = 0
        self.last_boundary_s = 0.0
        self._wake: simpy.Event | None = None

    @property
    def running(self) -> IntArray:
        """Ids of the requests the unit holds (admitted, not yet left)."""
        return self.rs.ids

    def wake(self) -> None:
        """Cut a sleep short: the pool routed this unit work, or its feed got a new arrival."""
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    def _sleep(self) -> Generator[simpy.Event, Any, None]:
        env = self.env
        self._wake = env.event()
        events: list[simpy.Event] = [self._wake]
        nxt = self.pool.feed.next_time()
        if math.isfinite(nxt):
            events.append(env.timeout(max(nxt - env.now, 0.0)))
        yield env.any_of(events)
        self._wake = None

    def run(self) -> Generator[simpy.Event, Any, None]:
        env, pool = self.env, self.pool
        while True:
            now = float(env.now)
            if now < self.last_boundary_s:
                raise EngineError(f"unit {self.index} of {pool.name}: time went backwards")
            self.last_boundary_s = now
            pool.deliver(now)
            step = plan(pool, self.index, self.rs)
            if step is None:
                lo = self.index * pool.ranks_per_unit
                if pool.has_queued(lo) or self.rs.n:
                    raise EngineError(
                        f"unit {self.index} of {pool.name} holds work it cannot schedule "
                        f"({self.rs.n} running, queues {pool.queues.total})"
                    )
                yield from self._sleep()
                continue
            cost = self.cost.step_cost(step.batch)
            if not (cost.duration_s > 0 and math.isfinite(cost.duration_s)):
                raise EngineError(
                    f"{pool.name}: the cost model priced a {step.batch.size}-segment step at "
                    f"{cost.duration_s} s; a step must take a positive, finite time"
                )
            yield env.timeout(cost.duration_s)
            record = apply_step(pool, self.index, self.rs, step, now, float(env.now), cost)
            pool.log.append(record)
            self.steps += 1
