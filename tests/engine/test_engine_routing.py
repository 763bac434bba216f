"""Routers: registry errors, and where each one sends requests."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from sim.engine import ROUTERS, make_router
from sim.engine.router import RankLoad
from tests.builders import unit
from tests.engine.fixed_cost import FixedCost, requests, run_trace


def test_unknown_router_lists_known_ones() -> None:
    with pytest.raises(ValueError, match="least_kv, least_requests, least_tokens, round_robin"):
        make_router("random", 4)


def test_unknown_router_in_a_deployment_names_the_field() -> None:
    # refused by the spec, before any run: the field and the known names
    with pytest.raises(
        ValueError, match=r"router\n.*'round_robin', 'least_tokens', 'least_kv' or 'least_requests'"
    ):
        unit(ranks=2, router="fastest")


@pytest.mark.parametrize("name", sorted(ROUTERS))
def test_over_one_rank_every_router_sends_everything_there_without_reading_load(name: str) -> None:
    router = make_router(name, 1)
    assert not router.reads_work  # the pool need not sum the running requests' work for it
    load = _load([5], [3], [2], [4], [1])
    pages, work = np.array([1, 2, 3]), np.array([10, 20, 30])
    assert router.choose_many(load, pages, work).tolist() == [0, 0, 0]
    assert router.choose(load) == 0
    with pytest.raises(ValueError, match="unknown router"):
        make_router("random", 1)  # the name is still checked


def test_registry_names() -> None:
    assert sorted(ROUTERS) == ["least_kv", "least_requests", "least_tokens", "round_robin"]


def _load(
    out: list[int], kv: list[int], queued: list[int], reqs: list[int], waiting: list[int]
) -> RankLoad:
    return RankLoad(*(np.array(x) for x in (out, kv, queued, reqs, waiting)))


def test_router_choices_and_ties() -> None:
    load = _load([5, 1, 1, 9], [0, 7, 3, 0], [4, 0, 0, 0], [3, 5, 4, 4], [2, 0, 0, 1])
    assert make_router("least_tokens", 4).choose(load) == 1  # tie 1/2 -> lowest index
    assert make_router("least_kv", 4).choose(load) == 3  # 0 + 0 beats 0 + 4
    # running + 4 x queued: 1 + 8, 5, 4, 3 + 4 -> rank 2
    assert make_router("least_requests", 4).choose(load) == 2
    rr = make_router("round_robin", 4)
    assert [rr.choose(load) for _ in range(6)] == [0, 1, 2, 3, 0, 1]


def test_least_tokens_spreads_a_burst() -> None:
    batch = requests(*[(0.0, 100, 10)] * 8)
    out = run_trace(unit(ranks=4, router="least_tokens"), FixedCost(), batch)
    assert np.bincount(out.table.home_rank[:8], minlength=4).tolist() == [2, 2, 2, 2]


def test_least_requests_spreads_a_burst_and_keeps_count() -> None:
    """A burst of 8 on 4 ranks goes two to each; the counters the router reads are checked
    against the requests at the end of the run (`check_kv`, one of the run's invariants)."""
    batch = requests(*[(0.0, 100, 10)] * 8, *[(0.5, 100, 10)] * 4)
    out = run_trace(unit(ranks=4, router="least_requests"), FixedCost(), batch)
    assert np.bincount(out.table.home_rank[:8], minlength=4).tolist() == [2, 2, 2, 2]
    assert out.cluster.pools[0].assigned.sum() == 0  # all finished: none left on a rank


def test_least_tokens_avoids_the_rank_with_a_long_request() -> None:
    batch = requests((0.0, 5000, 500), (0.0, 100, 10), (0.0, 100, 10), (0.0, 100, 10))
    out = run_trace(unit(ranks=2, router="least_tokens"), FixedCost(), batch)
    assert out.table.home_rank[:4].tolist() == [0, 1, 1, 1]


def test_mixed_attention_tp_gives_fewer_ranks_per_unit() -> None:
    from sim.specs import Deployment

    dep = Deployment(name="tp2dp4", gpus_per_node=8, attn_tp=2, router="round_robin")
    out = run_trace(dep, FixedCost(), requests(*[(0.0, 100, 5)] * 8))
    pool = out.cluster.pools[0]
    assert pool.ranks_per_unit == 4 and pool.log.batch_per_rank.shape[1] == 4
    assert np.bincount(out.table.home_rank[:8]).tolist() == [2, 2, 2, 2]


def test_replicas_are_separate_lock_step_units() -> None:
    dep = unit(ranks=2, replicas=2, router="round_robin", role="decode")
    # unit 0 gets the long contexts (ranks 0, 1), unit 1 the short ones (ranks 2, 3)
    batch = requests((0.0, 90_000, 4), (0.0, 90_000, 4), (0.0, 10, 4), (0.0, 10, 4))
    out = run_trace(dep, FixedCost(step_s=0.01, kv_token_s=1e-7), batch)
    t = out.table
    assert t.home_rank[:4].tolist() == [0, 1, 2, 3]
    log = out.cluster.pools[0].log
    assert sorted(set(log.column("unit").tolist())) == [0, 1]
    # replicas do not wait for each other: the short requests finish first
    assert t.finish_s[2] < t.finish_s[0]
    assert t.finish_s[2] == pytest.approx(4 * (0.01 + 13 * 1e-7), rel=1e-3)


@pytest.mark.parametrize("name", ["least_tokens", "least_kv", "least_requests", "round_robin"])
def test_choose_many_is_choose_request_by_request(name: str) -> None:
    """A step's arrivals routed at once land exactly where one `choose` per request, with the
    load updated after each, puts them (ties included), and the load is left unchanged: loads
    all equal, close together and far apart (a saturated unit's queues), bursts below, at and
    above a whole number per rank."""
    rng = np.random.default_rng(7)
    cases = ((1, 5), (1, 90), (4, 0), (7, 30), (7, 48), (7, 49), (33, 400), (5, 3_000),
             (144, 21), (60, 1), (8, 1), (2, 1), (144, 150), (144, 288), (144, 289))  # fmt: skip
    for (R, k), spread in itertools.product(cases, (1, 6, 300)):
        arrays = [rng.integers(0, spread, R) for _ in range(5)]
        load = _load(*(a.tolist() for a in arrays))
        pages, work = rng.integers(1, 9, k), rng.integers(1, 500, k)
        many, one = make_router(name, R), make_router(name, R)
        many.choose(load)  # a round robin's position carries over between steps
        got = many.choose_many(load, pages, work)
        unchanged = zip(arrays, load.__dict__.values(), strict=True)
        assert all(np.array_equal(a, b) for a, b in unchanged)
        live = _load(*(a.tolist() for a in arrays))
        one.choose(live)
        want = []
        for p, w in zip(pages.tolist(), work.tolist(), strict=True):
            r = one.choose(live)
            want.append(r)
            live.outstanding_tokens[r] += w
            live.queued_pages[r] += p
            live.requests[r] += 1
            live.queued[r] += 1
        assert got.tolist() == want


def test_the_generic_choose_many_follows_choose() -> None:
    """A router with only `choose` gets the base class's request-by-request `choose_many`."""
    from sim.engine.router import LeastKv, Router

    class Plain(Router):
        def choose(self, load: RankLoad) -> int:
            return LeastKv.choose(LeastKv(0), load)

    load = _load([0, 0, 0], [5, 0, 2], [0, 1, 0], [0, 0, 0], [0, 0, 0])
    pages = np.array([3, 1, 1, 4])
    got = Plain().choose_many(load, pages, np.zeros(4, dtype=np.int64))
    assert got.tolist() == make_router("least_kv", 3).choose_many(load, pages, pages).tolist()
    assert got.tolist() == [1, 2, 2, 1]  # scores 5,1,2 -> 5,4,2 -> 5,4,3 -> 5,4,4 (tie: 1)


def test_least_tokens_reads_the_work_running_requests_have_left() -> None:
    """Router load of running requests is summed from the running sets when least_tokens
    routes: a rank decoding a long answer keeps losing to one whose short answers finish."""
    batch = requests((0.0, 100, 1000), (0.5, 100, 10), (1.0, 100, 10), (1.5, 2000, 500))
    out = run_trace(unit(ranks=2, router="least_tokens"), FixedCost(), batch)
    # at 0.5 s rank 0 has ~950 output tokens left, rank 1 none; at 1.5 s rank 0 still ~900
    # left, rank 1 nothing (its two short answers done): the long prompt goes to rank 1 too
    assert out.table.home_rank[:4].tolist() == [0, 1, 1, 1]
    pool = out.cluster.pools[0]
    assert pool.work_left().tolist() == [0, 0]  # all done at the end
