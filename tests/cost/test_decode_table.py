"""`DecodeTable`: a decode-only step's uniform ranks found by signature, each the shape a
plain per-rank loop builds and the work the caller's memo gives it; and a decode step priced
through it against the general path (`StepRanks.shapes`, every rank shaped and looked up one by
one)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.batch import BatchShape
from sim.cost.memo import bucket, buckets
from sim.cost.rank_shape import FEW_RANKS, DecodeTable, RankShape, rank_shape
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment


class Priced:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


def shapes_of(n: np.ndarray, kv: np.ndarray, width: int, path: int) -> list[RankShape]:
    """Each rank's shape, one at a time: its one decode group (path, width, requests and
    the 2^(1/16) bucket of its context sum)."""
    return [
        RankShape(((path, width, int(c), round(math.log2(x) * 16)),))
        for c, x in zip(n.tolist(), kv.tolist(), strict=True)
    ]


def price(shape: RankShape) -> Priced:
    """A stand-in price that differs for every shape: requests plus a thousandth of the
    context-sum bucket."""
    ((_, _, n, b),) = shape.decode
    return Priced(n + b / 1000)


@pytest.mark.parametrize("ranks", [3, FEW_RANKS, 64])  # found in the dict, or searched
def test_lookup_gives_each_ranks_shape_and_prices_each_shape_once(ranks: int) -> None:
    rng = np.random.default_rng(3)
    calls: list[RankShape] = []
    table = DecodeTable(lambda s: calls.append(s) or price(s), max_entries=1000)
    for _ in range(60 if ranks < 64 else 20):
        n = rng.integers(1, 6 if ranks < 64 else 40, ranks)
        kv = (n * rng.integers(100, 130 if ranks < 64 else 3000, ranks)).astype(np.float64)
        slots, seconds = table.lookup(n, kv, 2, 0, int(n.sum()))
        want = shapes_of(n, kv, 2, 0)
        assert [table.shapes[s] for s in slots.tolist()] == want
        assert seconds.tolist() == [price(w).seconds for w in want]
        assert [table.works[s].seconds for s in slots.tolist()] == seconds.tolist()
    assert len(calls) == len(set(calls)) == len(table)  # one pricing per distinct shape


def test_table_starts_again_when_full_and_still_answers_every_rank() -> None:
    table = DecodeTable(price, max_entries=5)
    n = np.arange(1, 5, dtype=np.int64)
    kv = n * 1000.0
    table.lookup(n, kv, 1, 0, int(n.sum()))
    assert len(table) == 4
    more = np.arange(1, 8, dtype=np.int64)  # 3 new shapes: past 5, so it starts again
    slots, seconds = table.lookup(more, more * 1000.0, 1, 0, int(more.sum()))
    assert len(table) == 7  # this step's shapes, all of them
    want = shapes_of(more, more * 1000.0, 1, 0)
    assert [table.shapes[s] for s in slots.tolist()] == want
    assert seconds.tolist() == [price(w).seconds for w in want]
    again, _ = table.lookup(n, kv, 1, 0, int(n.sum()))  # met before the restart, and after it
    assert [table.shapes[s] for s in again.tolist()] == shapes_of(n, kv, 1, 0)


def test_widths_and_paths_are_told_apart_and_checked() -> None:
    table = DecodeTable(price, max_entries=100)
    n, kv = np.array([4]), np.array([4000.0])
    a, _ = table.lookup(n, kv, 1, 0, 4)
    b, _ = table.lookup(n, kv, 2, 0, 4)
    c, _ = table.lookup(n, kv, 1, 1, 4)
    assert len({int(a[0]), int(b[0]), int(c[0])}) == 3
    assert table.shapes[int(c[0])] == RankShape(((1, 1, 4, int(np.round(np.log2(4000) * 16))),))
    with pytest.raises(ValueError, match="width"):
        table.lookup(n, kv, 256, 0, 4)
    with pytest.raises(ValueError, match="outside the signature"):
        table.lookup(n, kv, 1, 0, 1 << 24)
    with pytest.raises(ValueError, match="at least 1"):
        DecodeTable(price, max_entries=0)


def test_decode_steps_cost_the_same_through_the_table_as_shape_by_shape() -> None:
    """The same decode-only steps priced by the model (which finds uniform ranks in its
    decode table) and by its general path, forced: identical durations, ranks and ops; and
    each rank's own time that of its `rank_shape`, shaped and priced on its own by a third,
    fresh model."""
    d = Deployment(name="ep16", nodes=2, gpus_per_node=8, attn_tp=1, moe_ep=16,
                   mtp_draft_tokens=1, mtp_acceptance=(0.7,), two_batch_overlap=True)  # fmt: skip
    args = (load_model("deepseek-v3"), load_gpu("h800"), d, load_profile("h800-published"))
    fast, general, alone = (ServingCostModel(*args) for _ in range(3))
    general._uniform_decode = lambda batch, n_r: None  # type: ignore[method-assign]
    rng = np.random.default_rng(11)
    for _ in range(30):
        counts = rng.integers(0, 90, 16)
        rank = np.repeat(np.arange(16), counts)
        b = BatchShape(
            num_ranks=16,
            rank=rank,
            new_tokens=np.full(rank.size, 2, dtype=np.int64),
            kv_tokens=rng.integers(50, 9000, rank.size),
            is_decode=np.ones(rank.size, dtype=bool),
        )
        x, y = fast.step_cost(b), general.step_cost(b)
        assert x.duration_s == y.duration_s and x.overlap_saved_s == y.overlap_saved_s
        assert np.array_equal(x.rank_own_s, y.rank_own_s)
        assert x.ops == y.ops
        for r in np.flatnonzero(counts).tolist():
            sel = rank == r
            q, k, dec = b.new_tokens[sel], b.kv_tokens[sel], b.is_decode[sel]
            own = alone._price_rank(rank_shape(q, k, dec, alone._paths(q, k, dec), None))
            assert x.rank_own_s[r] == own.seconds
    assert len(fast._decode_table) > 0  # the table did answer


def test_a_one_rank_step_finds_the_shape_and_seconds_a_many_rank_lookup_gives() -> None:
    """`ranks` of a one-rank unit takes its scalar path (a dict by the shape's numbers); it
    must answer as `lookup` does, also across the table starting again when full."""
    rng = np.random.default_rng(9)
    one = DecodeTable(price, max_entries=7)
    for _ in range(60):
        n = int(rng.integers(1, 6))
        kv = rng.integers(1, 5000, n)
        step = BatchShape(
            num_ranks=1,
            rank=np.zeros(n, dtype=np.int64),
            new_tokens=np.full(n, 2, dtype=np.int64),
            kv_tokens=kv,
            is_decode=np.ones(n, dtype=bool),
        )
        index, seconds = one.ranks(step, np.array([n]), 2, 0)
        (want,) = shapes_of(np.array([n]), np.array([float(kv.sum())]), 2, 0)
        assert one.shapes[int(index[0])] == want
        assert seconds.tolist() == [price(want).seconds]


def test_one_values_bucket_is_the_arrays_bucket() -> None:
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.uniform(0.5, 1e7, 2000), 2.0 ** np.arange(-3, 30), [1.0, 3.0]])
    assert [bucket(v) for v in x.tolist()] == buckets(x).tolist()
