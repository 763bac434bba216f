"""PD KV hand-off: caches leaving one prefill rank share its link, one after another."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.engine.arrivals import TransferFeed
from sim.engine.pd import KvTransfer
from sim.engine.requests import RequestTable


def _link(prompts: list[int], ranks: list[int]) -> tuple[KvTransfer, TransferFeed, np.ndarray]:
    table = RequestTable()
    n = len(prompts)
    ids = table.add(
        np.zeros(n), np.array(prompts), np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    )
    table.home_rank[ids] = ranks
    feed = TransferFeed()
    # 100 bytes per token over 10 kB/s: 0.01 s per token
    link = KvTransfer(table, feed, kv_bytes_per_token=100.0, state_tokens=0, bandwidth_bytes_s=1e4)
    return link, feed, ids


def _landed(link: KvTransfer, feed: TransferFeed) -> dict[int, float]:
    """Request id -> landing time of everything in flight (drains the feed)."""
    out: dict[int, float] = {}
    while feed.in_flight:
        t = feed.next_time()
        ids, _ = feed.pop_until(t, link.table)
        out.update({int(i): t for i in ids})
    return out


def test_caches_from_one_rank_queue_on_its_link_others_do_not() -> None:
    link, feed, ids = _link([100, 200, 100, 300], [0, 0, 1, 0])
    link.send(ids[:3], now=5.0)
    # rank 0: 1 s then 2 s back to back; rank 1: 1 s on its own link
    assert _landed(link, feed) == pytest.approx({0: 6.0, 1: 8.0, 2: 6.0})
    link.send(ids[3:], now=7.0)  # rank 0's link is busy until 8 s
    assert _landed(link, feed) == pytest.approx({3: 11.0})
    assert link.sent == 4
    assert link.total_s == pytest.approx(1.0 + 3.0 + 1.0 + 4.0)  # hand-off to landing


def test_an_idle_link_sends_at_once() -> None:
    link, feed, ids = _link([50], [3])
    link.send(ids, now=20.0)
    assert _landed(link, feed) == pytest.approx({0: 20.5})


@settings(max_examples=60, deadline=None)
@given(
    sends=st.lists(
        st.tuples(
            st.floats(0.0, 5.0),  # time since the previous send
            st.lists(st.tuples(st.integers(1, 500), st.integers(0, 3)), min_size=1, max_size=6),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_each_rank_link_carries_one_cache_at_a_time(
    sends: list[tuple[float, list[tuple[int, int]]]],
) -> None:
    """Whatever the sends, a rank's caches land in order, never overlap on its link, none lands
    before its own transfer time, and the link time adds up."""
    prompts = [p for _, batch in sends for p, _ in batch]
    ranks = [r for _, batch in sends for _, r in batch]
    link, feed, ids = _link(prompts, ranks)
    now, start, sent_at = 0.0, 0, {}
    for gap, batch in sends:
        now += gap
        chunk = ids[start : start + len(batch)]
        sent_at.update({int(i): now for i in chunk})
        link.send(chunk, now)
        start += len(batch)
    landed = _landed(link, feed)
    assert sorted(landed) == list(range(len(prompts)))
    for rank in set(ranks):
        mine = sorted((i for i in landed if ranks[i] == rank), key=lambda i: (sent_at[i], i))
        busy_until = 0.0
        for i in mine:  # FIFO per rank: each starts when sent or when the link frees up
            start_s = max(sent_at[i], busy_until)
            assert landed[i] == pytest.approx(start_s + prompts[i] * 0.01)
            busy_until = landed[i]
    assert link.total_s == pytest.approx(sum(landed[i] - sent_at[i] for i in landed))
