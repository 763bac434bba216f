"""`step_cost(batch)` is a pure function of the batch: its memos return only what pricing would.

Ranks are priced at their rounded shape (`sim.cost.rank_shape`) and unit-wide work at its
rounded load (`CommLoad.rounded`), so a step costs the same fresh and after any other steps.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.batch import BatchShape, StepCost
from sim.cost.memo import BoundedCache
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment

V3 = load_model("deepseek-v3")
H200 = load_gpu("h200")


def batch(rng: np.random.Generator, ranks: int, prefill_ranks: int) -> BatchShape:
    """A step of `ranks` ranks of 1-64 decode requests (contexts 100-20,000), the first
    `prefill_ranks` also running a prompt chunk of 16-4,096 tokens after a 0-8,192 prefix."""
    counts = rng.integers(1, 65, ranks)
    rank = np.repeat(np.arange(ranks), counts)
    new = np.ones(rank.size, dtype=np.int64)
    kv = rng.integers(100, 20_000, rank.size)
    dec = np.ones(rank.size, dtype=bool)
    chunk_q = rng.integers(16, 4097, prefill_ranks)
    chunk_kv = chunk_q + rng.choice([0, 1024, 8192], prefill_ranks)
    return BatchShape(
        num_ranks=ranks,
        rank=np.concatenate([rank, np.arange(prefill_ranks)]),
        new_tokens=np.concatenate([new, chunk_q]),
        kv_tokens=np.concatenate([kv, chunk_kv]),
        is_decode=np.concatenate([dec, np.zeros(prefill_ranks, dtype=bool)]),
    )


def neighbour(b: BatchShape, rng: np.random.Generator) -> BatchShape:
    """The same requests with every context a few tokens longer: mostly the same buckets."""
    return BatchShape(
        num_ranks=b.num_ranks,
        rank=b.rank,
        new_tokens=b.new_tokens,
        kv_tokens=b.kv_tokens + rng.integers(0, 40, b.size),
        is_decode=b.is_decode,
    )


def assert_identical(a: StepCost, b: StepCost) -> None:
    assert a.duration_s == b.duration_s
    assert a.overlap_saved_s == b.overlap_saved_s
    assert np.array_equal(a.rank_own_s, b.rank_own_s)
    assert a.ops == b.ops


@pytest.mark.parametrize(
    ("deployment", "profile", "prefill_ranks"),
    [
        (Deployment(name="dp8", attn_tp=1), "h200-sglang", 0),
        (Deployment(name="dp8_tbo", attn_tp=1, two_batch_overlap=True), "h200-sglang", 0),
        (Deployment(name="dp8_mixed", attn_tp=1, two_batch_overlap=True), "h200-measured", 8),
        (
            Deployment(name="dp8_mtp", attn_tp=1, mtp_draft_tokens=1, mtp_acceptance=(0.8,)),
            "h200-roofline",
            3,
        ),
    ],
)
def test_a_step_costs_the_same_fresh_and_after_other_steps(
    deployment: Deployment, profile: str, prefill_ranks: int
) -> None:
    rng = np.random.default_rng(7)
    target = batch(rng, 8, prefill_ranks)
    others = [batch(rng, 8, prefill_ranks) for _ in range(12)]
    others += [neighbour(target, rng) for _ in range(6)]
    order = rng.permutation(len(others))
    p = load_profile(profile)
    fresh = ServingCostModel(V3, H200, deployment, p).step_cost(target)
    used = ServingCostModel(V3, H200, deployment, p)
    seen = [used.step_cost(others[i]) for i in order]
    assert_identical(used.step_cost(target), fresh)
    # and every other step too, priced again in another order by a fresh model
    again = ServingCostModel(V3, H200, deployment, p)
    for i in order[::-1]:
        assert_identical(again.step_cost(others[i]), seen[int(np.flatnonzero(order == i)[0])])


def test_the_memo_evicts_the_least_recently_used_entry_one_at_a_time() -> None:
    cache: BoundedCache[int, int] = BoundedCache(3)
    calls: list[int] = []

    def value(k: int) -> int:
        calls.append(k)
        return k * k

    for k in (1, 2, 3):
        cache.get(k, lambda k=k: value(k))  # type: ignore[misc]
    cache.get(1, lambda: value(1))  # a hit: 1 is now the most recent
    cache.get(4, lambda: value(4))  # evicts 2, the least recent
    assert len(cache) == 3 and calls == [1, 2, 3, 4]
    cache.get(1, lambda: value(1))
    cache.get(2, lambda: value(2))
    assert calls == [1, 2, 3, 4, 2]
    with pytest.raises(ValueError, match="max_entries"):
        BoundedCache(0)


def test_many_lookups_at_once_hit_miss_and_evict_as_one_at_a_time() -> None:
    """`get_many` is `get` of each key in turn: the same values, misses and evictions."""
    one: BoundedCache[int, int] = BoundedCache(3)
    many: BoundedCache[int, int] = BoundedCache(3)
    calls: list[int] = []

    def value(k: int) -> int:
        calls.append(k)
        return k * k

    keys = [1, 2, 1, 3, 4, 1, 2, 5, 2]
    want = [one.get(k, lambda k=k: k * k) for k in keys]  # type: ignore[misc]
    assert many.get_many(keys, value) == want
    assert calls == [1, 2, 3, 4, 2, 5]  # 2 was evicted by 4, so it is priced again
    assert list(many._entries) == list(one._entries) == [1, 5, 2]


class _NoMemo:
    """A memo that remembers nothing: every lookup prices afresh."""

    def get(self, key: object, compute: Callable[[], float]) -> float:
        return compute()


def test_a_decode_steps_remembered_saving_is_the_saving_priced_afresh() -> None:
    """Two-batch overlap's saving of a decode-only step is remembered by its critical rank's
    shape and time, its load and its unit-wide ops. Steps whose critical rank repeats while the
    other ranks, and so the load, change must each get their own saving, and the same one a
    model that remembers nothing prices."""
    rng = np.random.default_rng(11)
    d = Deployment(name="dp8_tbo", attn_tp=1, two_batch_overlap=True)
    p = load_profile("h200-sglang")
    kept, afresh = ServingCostModel(V3, H200, d, p), ServingCostModel(V3, H200, d, p)
    afresh._tbo._decode_saved = _NoMemo()  # type: ignore[assignment]
    crit_kv = rng.integers(4_000, 8_000, 48)  # rank 0: the same 48 requests every step
    saved = set()
    for _ in range(24):
        counts = np.concatenate([[48], rng.integers(2, 33, 7)])
        rank = np.repeat(np.arange(8), counts)
        kv = np.concatenate([crit_kv, rng.integers(100, 2_000, int(counts[1:].sum()))])
        b = BatchShape(
            num_ranks=8, rank=rank, new_tokens=np.ones(rank.size, dtype=np.int64),
            kv_tokens=kv, is_decode=np.ones(rank.size, dtype=bool),
        )  # fmt: skip
        a, f = kept.step_cost(b), afresh.step_cost(b)
        assert_identical(a, f)
        saved.add(a.overlap_saved_s)
    assert len(saved) > 4  # the loads changed the saving ...
    assert 0 < len(kept._tbo._decode_saved._entries) < 24  # ... and some steps were remembered
