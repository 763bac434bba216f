"""Routers: which attention rank (of any unit or replica in a pool) a new request joins.

A router sees per-rank load arrays and returns one rank. Ties go to the lowest rank index, so a
run stays deterministic. Routers live in a registry; an unknown name lists the known ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sim.engine.requests import IntArray


@dataclass(frozen=True)
class RankLoad:
    """Live per-rank load of a pool (arrays are views; routers must not write to them)."""

    outstanding_tokens: IntArray  # prefill + output tokens still to compute, queued and running
    kv_pages: IntArray  # KV pages in use
    queued_pages: IntArray  # KV pages that queued requests will need on admission
    requests: IntArray  # requests on the rank, queued and running
    queued: IntArray  # of those, queued


class Router:
    """Chooses a rank for one request."""

    name = "router"

    def choose(self, load: RankLoad) -> int:
        raise NotImplementedError


class RoundRobin(Router):
    name = "round_robin"

    def __init__(self, num_ranks: int) -> None:
        self.num_ranks = num_ranks
        self._next = 0

    def choose(self, load: RankLoad) -> int:
        r = self._next
        self._next = (r + 1) % self.num_ranks
        return r


class LeastTokens(Router):
    """Fewest outstanding tokens (prefill + decode work left, queued and running).

    It counts each request's decode work from its true output length, which a real router
    does not know: read it as the best a length-aware router could do. `least_kv` uses only
    what a router sees (KV in use and queued)."""

    name = "least_tokens"

    def __init__(self, num_ranks: int) -> None:
        self.num_ranks = num_ranks

    def choose(self, load: RankLoad) -> int:
        return int(load.outstanding_tokens.argmin())


class LeastKv(Router):
    """Least KV in use, counting what queued requests will take."""

    name = "least_kv"

    def __init__(self, num_ranks: int) -> None:
        self.num_ranks = num_ranks

    def choose(self, load: RankLoad) -> int:
        return int((load.kv_pages + load.queued_pages).argmin())


class LeastRequests(Router):
    """Fewest requests, a queued one counting as four running ones: what a router sees without
    lengths (vLLM's data-parallel balancing scores engines as 4 x waiting + running)."""

    name = "least_requests"
    QUEUED_WEIGHT = 4

    def __init__(self, num_ranks: int) -> None:
        self.num_ranks = num_ranks

    def choose(self, load: RankLoad) -> int:
        # running + 4 x queued = requests + 3 x queued
        return int((load.requests + (self.QUEUED_WEIGHT - 1) * load.queued).argmin())


ROUTERS: dict[str, Callable[[int], Router]] = {
    RoundRobin.name: RoundRobin,
    LeastTokens.name: LeastTokens,
    LeastKv.name: LeastKv,
    LeastRequests.name: LeastRequests,
}


def make_router(name: str, num_ranks: int) -> Router:
    """A fresh router (its state belongs to one run); ValueError lists the known names."""
    if name not in ROUTERS:
        raise ValueError(f"unknown router {name!r}: known routers are {', '.join(sorted(ROUTERS))}")
    return ROUTERS[name](num_ranks)
