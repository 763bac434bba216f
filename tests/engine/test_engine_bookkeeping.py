"""Counters and derived columns the engine keeps incrementally equal a fresh recount."""

from __future__ import annotations

import numpy as np
import pytest

from sim.cost.batch import BatchShape, StepCost
from sim.engine import scheduler, step
from sim.engine.kv import KvPages
from sim.engine.log import rank_imbalance
from sim.engine.requests import EngineError, RequestTable
from sim.engine.running import END, IDS, RANK, RunningSet, leading
from tests.builders import unit
from tests.engine.fixed_cost import FixedCost, requests, run_trace


@pytest.mark.parametrize(
    "x",
    [
        np.random.default_rng(0).random(144) * 1e-3,
        np.random.default_rng(1).random(7),
        np.zeros(5),
        np.zeros(0),
        np.array([0.0, 0.0, 3e-4]),
        np.random.default_rng(2).random(33).astype(np.float32),
        np.array([3e-4]),  # one rank (a tensor-parallel unit)
        np.array([0.1234567891234]),
        np.zeros(1),
    ],
)
def test_log_imbalance_is_the_step_costs_own(x: np.ndarray) -> None:
    cost = StepCost(duration_s=1.0, rank_own_s=x)
    assert rank_imbalance(x) == cost.rank_imbalance  # bit for bit, not approximately


@pytest.mark.parametrize("page, state", [(1, 0), (16, 0), (64, 10), (7, 3)])
def test_pages_and_max_tokens_agree_with_ceiling_division(page: int, state: int) -> None:
    kv = KvPages(1, capacity_tokens=1000, page_tokens=page, state_tokens=state)
    t = np.arange(-20, 1100)
    assert np.array_equal(kv.pages_for(t), -(-(t + state) // page))
    assert np.array_equal(t <= kv.max_tokens, kv.pages_for(t) <= kv.capacity_pages)


def test_kv_grow_is_all_or_nothing() -> None:
    kv = KvPages(4, capacity_tokens=100, page_tokens=10, state_tokens=0)  # 10 pages a rank
    kv.take(np.array([2, 3]), np.array([9, 4]))
    full = kv.grow(2, 2, np.array([0, 0, 1]), np.array([1, 1, 1]))  # rank 2 would hold 11
    assert full.tolist() == [0] and kv.used.tolist() == [0, 0, 9, 4]
    assert kv.grow(2, 2, np.array([0, 1, 1]), np.array([1, 2, 3])).size == 0
    assert kv.used.tolist() == [0, 0, 10, 9] and kv.peak_pages == 10


def test_a_one_rank_units_kv_grow_is_all_or_nothing() -> None:
    """A unit of one rank grows in scalar arithmetic: the same all-or-nothing answer."""
    kv = KvPages(3, capacity_tokens=100, page_tokens=10, state_tokens=0)  # 10 pages a rank
    kv.take(np.array([1]), np.array([7]))
    full = kv.grow(1, 1, np.array([0, 0]), np.array([2, 2]))  # rank 1 would hold 11
    assert full.tolist() == [0] and kv.used.tolist() == [0, 7, 0] and kv.peak_pages == 7
    assert kv.grow(1, 1, np.array([0, 0, 0]), np.array([1, 1, 1])).size == 0
    assert kv.used.tolist() == [0, 10, 0] and kv.peak_pages == 10


def _table(n: int) -> RequestTable:
    t = RequestTable()
    rng = np.random.default_rng(5)
    ids = t.add(
        np.zeros(n), rng.integers(1, 500, n), rng.integers(1, 300, n), np.zeros(n, dtype=np.int64)
    )
    t.generated[ids] = rng.integers(0, 1, n)
    t.prefilled[ids[::3]] = t.input_tokens[ids[::3]]  # every third one needs no prefill
    return t


def test_running_set_counters_follow_appends_and_removals() -> None:
    t, n, ranks = _table(60), 60, 5
    rs = RunningSet(ranks, draft_tokens=2, page_tokens=16, state_tokens=4, capacity=4)
    rng = np.random.default_rng(9)
    order = rng.permutation(n)
    for chunk in np.array_split(order, 6):
        rank = rng.integers(0, ranks, chunk.shape[0])
        dec = t.prefilled[chunk] >= t.prefill_target[chunk]
        rs.append(t, chunk, rank, np.full(chunk.shape[0], 3), dec)
    model = list(rs.ids)  # the order a naive mask-based removal would leave
    for _ in range(5):
        pos = np.sort(rng.choice(rs.n, size=7, replace=False))
        want_ids, want_rank = rs.ids[pos].copy(), rs.rank[pos].copy()
        cols = rs.pop(pos)
        assert np.array_equal(cols[IDS], want_ids) and np.array_equal(cols[RANK], want_rank)
        keep_n, gone = len(model) - 7, set(pos.tolist())
        fill = [model[j] for j in range(keep_n, len(model)) if j not in gone]
        for hole in [p for p in pos.tolist() if p < keep_n]:
            model[hole] = fill.pop(0)
        model = model[:keep_n]
        assert rs.ids.tolist() == model
        assert np.array_equal(rs.per_rank, np.bincount(rs.rank, minlength=ranks))
        assert rs.n_prefill == int((~rs.is_decode).sum())
        assert np.array_equal(rs.room, rs.pages * 16 - 4)
        expect_left = t.output_tokens[rs.ids] - t.generated[rs.ids]
        assert np.array_equal(rs.left, expect_left) and cols[END].shape == (7,)


class _Writes(FixedCost):
    """A cost model that tries to change the batch it is given."""

    def step_cost(self, batch: BatchShape) -> StepCost:
        batch.kv_tokens[:1] += 1
        return super().step_cost(batch)


def test_batch_views_are_read_only_to_the_cost_model() -> None:
    with pytest.raises(ValueError, match="read-only"):
        run_trace(unit(role="decode"), _Writes(step_s=0.01), requests((0.0, 10, 5)))


def test_an_illegal_transition_names_the_request_one_or_many() -> None:
    """A request in the wrong phase stops the run with its id and phase, whether the
    transition names it alone (an array or a slice of one: the scalar test) or among others."""
    t = RequestTable()
    ids = t.add(np.zeros(3), np.full(3, 10), np.full(3, 5), np.zeros(3, dtype=np.int64))
    t.admit(ids[:2], np.ones(2, dtype=np.int64))  # 0 and 1 prefill, 2 stays queued
    for which in (ids[2:], slice(2, 3), ids):
        wrong = r"cannot complete request [02]: it is (QUEUED|PREFILL)"
        with pytest.raises(EngineError, match=wrong):
            t.complete(which, 1.0)
    with pytest.raises(EngineError, match="cannot admit request 1: it is PREFILL"):
        t.admit(ids[1:2], np.ones(1, dtype=np.int64))
    t.route(slice(2, 3), np.zeros(1, dtype=np.int64))  # legal: queued, by a slice of one
    assert int(t.rank[2]) == 0


def test_decode_rows_are_a_slice_exactly_where_they_lead() -> None:
    """`decode_rows` names the rows `is_decode` marks: as the slice of the first rows where
    every row still in prefill comes after them, else as their positions."""
    t = _table(40)
    rs = RunningSet(3, capacity=4)
    ids = np.arange(40)
    dec = np.ones(40, dtype=bool)
    dec[-5:] = False  # rows still in prefill, last
    rs.append(t, ids, ids % 3, np.full(40, 2), dec)
    assert rs.decode_rows() == slice(0, 35)
    rs.turned_decode(t, np.array([36]))  # a decode row among them: by index
    got = rs.decode_rows()
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, rs.is_decode.nonzero()[0])
    assert got.tolist() == [*range(35), 36]
    rs.remove(np.array([35, 37, 38, 39]))  # none in prefill: every row
    assert rs.n_prefill == 0 and rs.decode_rows() == slice(0, 36)


def test_a_mixed_batch_names_its_decode_width_as_its_segments_hold_it() -> None:
    """The engine hands the cost model a step's verify width with its mixed batches
    (`decode_width`, so it need not read every decode segment): the new tokens of each."""
    rng = np.random.default_rng(6)
    n = 200
    rows = zip(np.sort(rng.uniform(0, 2, n)).tolist(), rng.integers(16, 3000, n).tolist(),
               rng.integers(1, 60, n).tolist(), strict=True)  # fmt: skip
    dep = unit(4, mtp_draft_tokens=2, mtp_acceptance=(0.7, 0.5), chunked_prefill_tokens=1024)
    seen: list[int] = []

    class Spy(FixedCost):
        def step_cost(self, batch: BatchShape) -> StepCost:
            dec = batch.is_decode
            if batch.decode_width is not None:
                assert np.count_nonzero(dec) < dec.shape[0]  # named for mixed batches
                assert (batch.new_tokens[dec] == batch.decode_width).all()
                seen.append(batch.decode_width)
            return super().step_cost(batch)

    run_trace(dep, Spy(step_s=0.005, prefill_token_s=1e-6), requests(*rows))
    assert seen and set(seen) == {3}  # 1 + two draft tokens


def test_decode_rows_leading_the_running_set_step_in_place_as_by_index(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A colocated step's decode rows are nearly always the running set's first rows, read and
    advanced in place (`RunningSet.decode_rows` gives their slice, `leading` finds one in an
    index array); where a long prompt still prefills among them they are gathered by index.
    Either way the same run, to the last token and second."""
    rng = np.random.default_rng(4)
    n = 300
    rows = zip(np.sort(rng.uniform(0, 3, n)).tolist(), rng.integers(16, 3000, n).tolist(),
               rng.integers(1, 60, n).tolist(), strict=True)  # fmt: skip
    trace = requests(*rows)
    dep = unit(4, mtp_draft_tokens=1, mtp_acceptance=(0.7,), chunked_prefill_tokens=1024)
    cost = FixedCost(step_s=0.005, prefill_token_s=1e-6)
    sliced: list[bool] = []

    def spy(pos: np.ndarray) -> np.ndarray | slice:
        got = leading(pos)
        sliced.append(isinstance(got, slice))
        return got

    def run() -> tuple[list[np.ndarray], ...]:
        out = run_trace(dep, cost, trace)
        t, log = out.table, out.cluster.pools[0].log
        return ([log.column(c) for c in ("start_s", "duration_s", "output_tokens")],
                [t.first_token_s[:n], t.finish_s[:n], t.generated[:n]])  # fmt: skip

    monkeypatch.setattr(step, "leading", spy)
    monkeypatch.setattr(scheduler, "leading", spy)
    in_place = run()
    assert any(sliced) and not all(sliced)  # both paths taken
    monkeypatch.setattr(step, "leading", lambda pos: pos)
    monkeypatch.setattr(scheduler, "leading", lambda pos: pos)
    monkeypatch.setattr(RunningSet, "decode_rows", lambda rs: rs.is_decode.nonzero()[0])
    by_index = run()
    for a, b in zip(in_place, by_index, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
