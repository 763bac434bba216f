"""Rank queues: the head arrays admission reads stay the first entry of every queue, whichever
way entries came (the array path for arrivals on empty queues, or one by one)."""

from __future__ import annotations

import numpy as np

from sim.engine.queues import FEW_ARRIVALS, RankQueues


def _heads_match(q: RankQueues) -> None:
    for r in range(q.length.shape[0]):
        entries = list(q.front(r))
        assert q.length[r] == len(entries)
        assert q.queued_pages[r] == sum(e[1] for e in entries)
        if entries:
            assert (q.head_ids[r], q.head_pages[r], q.head_tokens[r]) == entries[0]
        else:
            assert (q.head_ids[r], q.head_pages[r]) == (-1, RankQueues.EMPTY)


def test_heads_follow_pushes_pops_and_preemptions() -> None:
    q = RankQueues(4)
    ranks = np.array([2, 0, 2, 3, 2])
    q.push_many(ranks, np.arange(5), np.array([5, 6, 7, 8, 9]), np.array([50, 60, 0, 80, 90]))
    _heads_match(q)
    assert q.ids(2) == [0, 2, 4]  # arrival order within a rank
    q.pop_heads(np.array([0, 2]))
    _heads_match(q)
    assert q.ids(2) == [2, 4] and q.ids(0) == []
    q.push_front(2, [(7, 1, 10), (8, 2, 20)])  # preempted, oldest first, ahead of the queue
    _heads_match(q)
    assert q.ids(2) == [7, 8, 2, 4]
    q.push_many(np.array([0]), np.array([9]), np.array([3]), np.array([30]))
    _heads_match(q)
    assert q.admissible(0, 4, np.array([3, 0, 0, 8]), np.array([1, 1, 1, 0])).tolist() == [0]


def test_drop_fronts_takes_several_entries_per_rank() -> None:
    q = RankQueues(3)
    q.push_many(
        np.array([0, 0, 0, 2, 2]),
        np.arange(5),
        np.array([1, 2, 3, 4, 5]),
        np.zeros(5, dtype=np.int64),
    )
    q.drop_fronts([0, 2], [2, 2])  # rank 0 keeps id 2; rank 2 is emptied
    _heads_match(q)
    assert q.ids(0) == [2] and q.ids(2) == [] and q.queued_pages.tolist() == [3, 0, 0]
    assert list(q.front(0)) == [(2, 3, 0)]


def test_arrivals_on_empty_queues_and_on_longer_ones_queue_alike() -> None:
    """Distinct ranks with empty queues take the array path; a rank given two, or one already
    queueing, the walk: each queue holds its entries in arrival order either way."""
    q = RankQueues(5)
    q.push_many(np.array([3, 1]), np.array([0, 1]), np.array([4, 5]), np.array([0, 7]))
    _heads_match(q)
    q.push_many(np.array([1, 4, 4]), np.array([2, 3, 4]), np.array([1, 2, 3]), np.zeros(3, int))
    _heads_match(q)
    assert [q.ids(r) for r in range(5)] == [[], [1, 2], [], [0], [3, 4]]
    q.push_front(4, [(9, 6, 60)])
    _heads_match(q)
    assert q.ids(4) == [9, 3, 4]
    q.pop_heads(np.array([3]))
    q.drop_fronts([4], [2])
    _heads_match(q)
    assert [q.ids(r) for r in range(5)] == [[], [1, 2], [], [], [4]]
    assert q.queued_pages.tolist() == [0, 6, 0, 0, 3]


def test_random_operations_match_a_list_per_rank() -> None:
    """Every operation, in a random mix, against the plainest model of it: a Python list per
    rank. The slot pool is small to start with, so it grows, and reuses what pops free."""
    rng = np.random.default_rng(7)
    ranks = 6
    q = RankQueues(ranks, slots=4)
    model: list[list[tuple[int, int, int]]] = [[] for _ in range(ranks)]
    next_id = 0
    for _ in range(400):
        op = rng.integers(4)
        busy = [r for r in range(ranks) if model[r]]
        if op == 0 or not busy:  # arrivals, some ranks more than once, few and many
            n = int(rng.integers(1, 3 * FEW_ARRIVALS))
            at = rng.integers(0, ranks, n)
            ids = np.arange(next_id, next_id + n)
            pages, tokens = rng.integers(1, 50, n), rng.integers(0, 3, n) * 100
            next_id += n
            q.push_many(at, ids, pages, tokens)
            for r, e in zip(
                at.tolist(),
                zip(ids.tolist(), pages.tolist(), tokens.tolist(), strict=True),
                strict=True,
            ):
                model[r].append(e)
        elif op == 1:  # admitted heads
            pick = rng.choice(busy, size=int(rng.integers(1, len(busy) + 1)), replace=False)
            q.pop_heads(np.sort(pick))
            for r in pick.tolist():
                model[r].pop(0)
        elif op == 2:  # a preemption puts requests back ahead of the queue
            r = int(rng.integers(ranks))
            n = int(rng.integers(1, 4))
            back = [(next_id + k, int(rng.integers(1, 9)), 0) for k in range(n)]
            next_id += len(back)
            q.push_front(r, list(back))
            model[r][:0] = back
        else:  # walks admitting several entries of a few ranks
            pick = rng.choice(busy, size=int(rng.integers(1, len(busy) + 1)), replace=False)
            counts = [int(rng.integers(1, len(model[r]) + 1)) for r in pick.tolist()]
            q.drop_fronts(pick.tolist(), counts)
            for r, k in zip(pick.tolist(), counts, strict=True):
                del model[r][:k]
        assert [list(q.front(r)) for r in range(ranks)] == model
        _heads_match(q)
    live = sum(len(m) for m in model)
    assert q._slot.shape[1] <= 2 * max(live, 64)  # freed slots are reused, not leaked


def test_slot_pool_stays_at_the_most_entries_queued_at_once() -> None:
    q = RankQueues(2, slots=8)
    for i in range(1_000):  # 5 queued behind each head, 5 admitted, again and again
        six = np.zeros(6, dtype=np.int64)
        q.push_many(six, np.arange(6) + 6 * i, six + 1, six)
        q.drop_fronts([0], [6])
    assert q.length.tolist() == [0, 0] and q._slot.shape[1] == 8


def test_single_arrivals_queue_behind_their_heads_as_bursts_do() -> None:
    """One arrival at a time (a closed loop's usual step) takes the scalar path: queued
    behind the head in order, the slot pool growing from one slot, as a burst would queue."""
    one, burst = RankQueues(3, slots=1), RankQueues(3, slots=1)
    at = np.array([0, 2, 0, 0, 1, 2, 0, 2, 2, 0, 1, 0])
    ids = np.arange(at.shape[0])
    pages, tokens = ids % 5 + 1, ids % 3 * 100
    for k in range(at.shape[0]):
        one.push_many(at[k : k + 1], ids[k : k + 1], pages[k : k + 1], tokens[k : k + 1])
    burst.push_many(at, ids, pages, tokens)
    for r in range(3):
        assert list(one.front(r)) == list(burst.front(r))
        assert [e[0] for e in one.front(r)] == ids[at == r].tolist()
    assert one.length.tolist() == burst.length.tolist() == [6, 2, 4]
    assert one.queued_pages.tolist() == burst.queued_pages.tolist()
    _heads_match(one)
