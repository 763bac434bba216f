"""FIFO admission on each of a unit's rank queues within the rank's budget, worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from sim.engine.admission import RankBudget, fifo_admit
from sim.engine.queues import RankQueues
from sim.engine.requests import IntArray, RequestTable


def _queues() -> RankQueues:
    """Rank 0 queues ids 0, 1, 2 (3, 2, 1 pages; 100, 50, 10 prefill tokens); rank 1 queues
    id 3 (5 pages, already prefilled) then id 4 (1 page, 20 tokens)."""
    q = RankQueues(2)
    q.push_many(
        np.array([0, 0, 0, 1, 1]), np.arange(5), np.array([3, 2, 1, 5, 1]),
        np.array([100, 50, 10, 0, 20]),
    )  # fmt: skip
    return q


def _table() -> RequestTable:
    t = RequestTable()
    t.add(np.zeros(5), np.full(5, 100), np.full(5, 8), np.zeros(5, dtype=np.int64))
    return t


def _budget() -> RankBudget:
    return RankBudget(np.array([5, 6]), np.array([3, 1]), np.array([120, 0]))


def test_each_rank_admits_in_order_until_one_does_not_fit() -> None:
    q, budget = _queues(), _budget()
    ids, on, pages, chunks = fifo_admit(q, _table(), 0, np.array([0, 1]), budget, None)
    # rank 0: id 0 (chunk 100 of the 120 budget), id 1 (the 20 tokens left), then id 2 has 1
    # page to rank 0's 0 free, so rank 0 stops; rank 1: id 3 (prefilled: no budget needed),
    # then no slot for id 4
    assert ids.tolist() == [0, 1, 3] and on.tolist() == [0, 0, 1]
    assert pages.tolist() == [3, 2, 5] and chunks.tolist() == [100, 20, 0]
    assert budget.free_pages.tolist() == [0, 1] and budget.free_slots.tolist() == [1, 0]
    assert budget.prefill_tokens.tolist() == [0, 0]
    assert q.ids(0) == [2] and q.ids(1) == [4]  # the admitted left their queues


def test_reserve_counts_against_free_pages() -> None:
    def one_more(ids: IntArray, covered: IntArray, held: IntArray) -> IntArray:
        return np.ones(ids.shape[0], dtype=np.int64)

    q, budget = _queues(), _budget()
    ids, _, pages, _ = fifo_admit(q, _table(), 0, np.array([0, 1]), budget, one_more)
    # id 0 needs 3 + 1 of 5 pages, id 3 5 + 1 of 6; then id 1 needs 2 + 1 of rank 0's 1 left
    assert ids.tolist() == [0, 3] and pages.tolist() == [3, 5]  # the reserve is not taken
    assert budget.free_pages.tolist() == [1, 0]


@pytest.mark.parametrize("deep", [False, True])
def test_array_admission_admits_as_the_queue_walk_does(deep: bool) -> None:
    """Without a reserve, ranks admit through `fifo_admit`'s rounds over the queue heads (the
    last few ranks still admitting walk their queue); a reserve of zero pages forces the walk
    everywhere: both must admit the same requests in the same order with the same chunks and
    leave the same budget and queues. `deep`: queues of up to seven and up to six free slots on
    all 24 ranks, so that many ranks take several rounds."""

    def nothing(ids: IntArray, covered: IntArray, held: IntArray) -> IntArray:
        return np.zeros(ids.shape[0], dtype=np.int64)

    R, lo = (24, 4) if deep else (12, 4)
    t = RequestTable()
    t.add(np.zeros(256), np.full(256, 100), np.full(256, 8), np.zeros(256, dtype=np.int64))
    admitted = refused = 0
    for trial in range(40):
        runs = []
        for reserve in (None, nothing):
            rng = np.random.default_rng(trial)  # both runs draw the same case
            q = RankQueues(lo + R)
            ranks = np.sort(rng.choice(R, size=rng.integers(1, R), replace=False))
            n = ranks.shape[0]
            tokens = np.where(rng.random(n) < 0.5, 0, rng.integers(1, 300, n))
            q.push_many(ranks + lo, np.arange(n), rng.integers(1, 9, n), tokens)
            if trial % 2 or deep:  # some ranks queue more: those walk their queue or not
                for k in range(6 if deep else 1):
                    more = ranks[rng.random(n) < (0.7 if deep else 0.4)]
                    m = more.shape[0]
                    first = n + 32 * k
                    toks = np.where(rng.random(m) < 0.6, 0, rng.integers(1, 200, m))
                    q.push_many(more + lo, first + np.arange(m), rng.integers(1, 5, m), toks)
            slots = rng.integers(1, 7, R) if deep else rng.integers(1, 3, R)
            budget = RankBudget(np.full(R, 20), slots, np.where(rng.random(R) < 0.3, 0, 128))
            got = fifo_admit(q, t, lo, ranks, budget, reserve)
            state = [q.length.tolist(), q.head_ids.tolist(), q.queued_pages.tolist(),
                     q.head_pages.tolist(), q.head_tokens.tolist(),
                     [q.ids(r) for r in range(lo + R)]]  # fmt: skip
            runs.append(([a.tolist() for a in got], budget, state))
        (a, ba, qa), (b, bb, qb) = runs
        assert a == b and qa == qb
        for name in ("free_pages", "free_slots", "prefill_tokens"):
            assert getattr(ba, name).tolist() == getattr(bb, name).tolist()
        admitted += len(a[0])
        refused += len(set(ranks.tolist()) - set(a[1]))  # ranks that admitted none
    assert admitted > 0 and refused > 0  # both outcomes of the budget test were exercised
    if deep:
        assert admitted > 3 * 40  # several per rank: the rounds ran
