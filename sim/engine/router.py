"""Routers: which attention rank (of any unit or replica in a pool) a new request joins.

A router sees per-rank load arrays and returns one rank. Ties go to the lowest rank index, so a
run stays deterministic. `choose_many` routes a step's arrivals at once, exactly as one `choose`
per request with the load counting each routed request before the next is placed. Routers live
in a registry; an unknown name lists the known ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sim.engine.requests import IntArray

# up to this many arrivals, `_merge_argmin` sorts the few candidate pairs (`_few_picks`) instead
# of bisecting on a level; more arrivals, while their candidate pairs number at most
# `_PAIRS_MAX` (a burst over ranks whose scores lie close together, as a balanced router
# keeps them), sort those pairs too
_LOOP_MAX = 48
_PAIRS_MAX = 4096


@dataclass(frozen=True)
class RankLoad:
    """Live per-rank load of a pool (arrays are views; routers must not write to them)."""

    outstanding_tokens: IntArray  # prefill + output tokens still to compute, queued and running
    kv_pages: IntArray  # KV pages in use
    queued_pages: IntArray  # KV pages that queued requests will need on admission
    requests: IntArray  # requests on the rank, queued and running
    queued: IntArray  # of those, queued


def _sequential_argmin(score: IntArray, add: IntArray) -> IntArray:
    """Request k goes to the lowest score (lowest index on ties), which then grows by add[k]."""
    s = score.copy()
    out = np.empty(add.shape[0], dtype=np.int64)
    for k, a in enumerate(add.tolist()):
        r = int(s.argmin())
        out[k] = r
        s[r] += a
    return out


def _few_picks(s: IntArray, step: int, k: int, m: int) -> IntArray:
    """`_merge_argmin` where no rank can take more than `m` of the k picks (m = k: any). Only
    the k ranks of lowest (score, rank) can be picked (a rank outside them would come after
    all k of them had been picked once), and their first min(k, m) scores s, s + step, ...
    hold every pick: the picks are the k smallest of those (score, rank) pairs, in order,
    each pair one integer key score * R + rank."""
    if k == 1:  # one arrival: the lowest score, the lowest rank among ties (argmin's first)
        return np.array([s.argmin()], dtype=np.int64)
    R = s.shape[0]
    key = s * R + np.arange(R)
    if k < R:
        key = key[np.argpartition(key, k - 1)[:k]]
    pairs = (key[:, None] + (step * R) * np.arange(min(k, m))).ravel()
    picks = np.partition(pairs, k - 1)[:k] if pairs.shape[0] > k else pairs
    picks.sort()
    return picks % R  # type: ignore[no-any-return]


def _merge_argmin(score: IntArray, step: int, k: int) -> IntArray:
    """`_sequential_argmin` where every request adds the same `step` > 0, without a long loop.

    Rank r's successive scores s_r, s_r + step, ... rise, so the greedy picks are a k-way merge
    of those lists: the k smallest (score, rank) pairs in order. The k-th smallest score L is
    found by bisection on how many pairs lie at or below a level; every pair below L is picked,
    then the lowest ranks with a pair at exactly L. Where the scores lie close together (a
    saturated unit's burst, spread by this router) the candidate pairs under a bound on L are
    few: those are sorted instead (`_few_picks`), as for a few picks.
    """
    s = score if score.dtype == np.int64 else score.astype(np.int64)  # read, never written
    if k <= _LOOP_MAX:
        return _few_picks(s, step, k, k)
    R = s.shape[0]
    least, most = int(s.min()), int(s.max())
    per_rank = -(-k // R)  # ceil(k / R): below the level each rank has fewer pairs than that
    lo = least + step * (per_rank - 1)  # under it no rank has per_rank pairs: fewer than k
    # at or above it every rank has per_rank pairs (at least k); the lowest rank alone has k
    # pairs up to least + step (k - 1)
    hi = min(least + step * (k - 1), most + step * (per_rank - 1))
    m = (hi - least) // step + 1  # pairs at or below hi on the lowest rank: the most any takes
    if min(k, R) * min(k, m) <= _PAIRS_MAX:  # scores close together: few candidate pairs
        return _few_picks(s, step, k, m)
    while lo < hi:
        mid = (lo + hi) // 2
        if int(np.maximum((mid - s) // step + 1, 0).sum()) >= k:
            hi = mid
        else:
            lo = mid + 1
    below = np.maximum((lo - 1 - s) // step + 1, 0)  # pairs under the level, per rank
    ties = ((s <= lo) & ((lo - s) % step == 0)).nonzero()[0][: k - int(below.sum())]
    ranks = np.repeat(np.arange(R, dtype=np.int64), below)
    j = np.arange(ranks.shape[0]) - np.repeat(np.cumsum(below) - below, below)
    order = np.argsort((s[ranks] + step * j) * R + ranks)  # distinct keys: (score, rank) order
    return np.concatenate([ranks[order], ties])


class Router:
    """Chooses a rank for one request."""

    name = "router"
    # whether it reads `outstanding_tokens`: the pool sums running requests' work only for one
    # that does (a router of unknown needs is given everything)
    reads_work = True

    def choose(self, load: RankLoad) -> int:
        raise NotImplementedError

    def choose_many(self, load: RankLoad, pages: IntArray, work: IntArray) -> IntArray:
        """Ranks of requests queued in order, each needing pages[k] KV pages on admission and
        work[k] tokens: what `choose` gives request by request with the load updated after each
        one (`load` itself is not changed). Routers override it with a vectorised equivalent."""
        live = RankLoad(*(np.array(a, dtype=np.int64) for a in (
            load.outstanding_tokens, load.kv_pages, load.queued_pages, load.requests,
            load.queued,
        )))  # fmt: skip
        out = np.empty(pages.shape[0], dtype=np.int64)
        for k, (p, w) in enumerate(zip(pages.tolist(), work.tolist(), strict=True)):
            r = out[k] = self.choose(live)
            live.outstanding_tokens[r] += w
            live.queued_pages[r] += p
            live.requests[r] += 1
            live.queued[r] += 1
        return out


class RoundRobin(Router):
    name = "round_robin"
    reads_work = False

    def __init__(self, num_ranks: int) -> None:
        self.num_ranks = num_ranks
        self._next = 0

    def choose(self, load: RankLoad) -> int:
        r = self._next
        self._next = (r + 1) % self.num_ranks
        return r

    def choose_many(self, load: RankLoad, pages: IntArray, work: IntArray) -> IntArray:
        k = pages.shape[0]
        out = (self._next + np.arange(k, dtype=np.int64)) % self.num_ranks
        self._next = (self._next + k) % self.num_ranks
        return out


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

    def choose_many(self, load: RankLoad, pages: IntArray, work: IntArray) -> IntArray:
        return _sequential_argmin(load.outstanding_tokens, work)


class LeastKv(Router):
    """Least KV in use, counting what queued requests will take."""

    name = "least_kv"
    reads_work = False

    def __init__(self, num_ranks: int) -> None:
        self.num_ranks = num_ranks

    def choose(self, load: RankLoad) -> int:
        return int((load.kv_pages + load.queued_pages).argmin())

    def choose_many(self, load: RankLoad, pages: IntArray, work: IntArray) -> IntArray:
        return _sequential_argmin(load.kv_pages + load.queued_pages, pages)


class LeastRequests(Router):
    """Fewest requests, a queued one counting as four running ones: what a router sees without
    lengths (vLLM's data-parallel balancing scores engines as 4 x waiting + running)."""

    name = "least_requests"
    reads_work = False
    QUEUED_WEIGHT = 4

    def __init__(self, num_ranks: int) -> None:
        self.num_ranks = num_ranks

    def choose(self, load: RankLoad) -> int:
        # running + 4 x queued = requests + 3 x queued
        return int((load.requests + (self.QUEUED_WEIGHT - 1) * load.queued).argmin())

    def choose_many(self, load: RankLoad, pages: IntArray, work: IntArray) -> IntArray:
        # each routed request is one more request, queued: its rank's score rises by 4
        score = load.requests + (self.QUEUED_WEIGHT - 1) * load.queued
        return _merge_argmin(score, self.QUEUED_WEIGHT, int(pages.shape[0]))


class OnlyRank(Router):
    """A pool of one rank (a TP-only deployment): every router picks it, so none is asked."""

    name = "only_rank"
    reads_work = False

    def choose(self, load: RankLoad) -> int:
        return 0

    def choose_many(self, load: RankLoad, pages: IntArray, work: IntArray) -> IntArray:
        return np.zeros(pages.shape[0], dtype=np.int64)


ROUTERS: dict[str, Callable[[int], Router]] = {
    RoundRobin.name: RoundRobin,
    LeastTokens.name: LeastTokens,
    LeastKv.name: LeastKv,
    LeastRequests.name: LeastRequests,
}


def make_router(name: str, num_ranks: int) -> Router:
    """A fresh router (its state belongs to one run); ValueError lists the known names. Over
    one rank every router picks that rank: `OnlyRank`, which reads no load."""
    if name not in ROUTERS:
        raise ValueError(f"unknown router {name!r}: known routers are {', '.join(sorted(ROUTERS))}")
    return OnlyRank() if num_ranks == 1 else ROUTERS[name](num_ranks)
