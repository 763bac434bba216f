"""Rank queues: the head arrays admission reads stay the first entry of every queue, whichever
way entries came (the array path for arrivals on empty queues, or one by one)."""

from __future__ import annotations

import numpy as np

from sim.engine.queues import RankQueues


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
