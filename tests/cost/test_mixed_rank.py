"""Ranks running prompt chunks are priced from memoised parts (`sim.cost.mixed_rank`): close to
pricing each such rank op by op, as the parts' rounding allows, and interpolated exactly."""

from __future__ import annotations

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.batch import BatchShape
from sim.cost.decode_sums import decode_sums
from sim.cost.layer_ops import RankSegments
from sim.cost.memo import BoundedCache, centre
from sim.cost.mixed_shape import MixedShape
from sim.cost.mixed_work import between
from sim.cost.rank_work import chunk_token_ops, decode_ops
from sim.cost.rate import OpTime
from sim.cost.serving import ServingCostModel
from sim.cost.step_ranks import StepCounts
from sim.specs import Deployment

V3 = load_model("deepseek-v3")
H200 = load_gpu("h200")


def mixed_batch(rng: np.random.Generator, ranks: int, chunk_ranks: int | None = None) -> BatchShape:
    """1-47 verify requests (width 2) on each rank and one prompt chunk (16-8,192 tokens, no
    prefix or one of 1,024 or 9,000) on each of the first `chunk_ranks` (all if None)."""
    chunked = ranks if chunk_ranks is None else chunk_ranks
    counts = rng.integers(1, 48, ranks)
    rank = np.repeat(np.arange(ranks), counts)
    width = 2
    chunk_q = rng.integers(16, 8193, chunked)
    chunk_kv = chunk_q + rng.choice([0, 0, 1024, 9000], chunked)
    return BatchShape(
        num_ranks=ranks,
        rank=np.concatenate([rank, np.arange(chunked)]),
        new_tokens=np.concatenate([np.full(rank.size, width), chunk_q]),
        kv_tokens=np.concatenate([rng.integers(100, 20_000, rank.size), chunk_kv]),
        is_decode=np.concatenate([np.ones(rank.size, dtype=bool), np.zeros(chunked, dtype=bool)]),
        samples_token=np.concatenate([np.ones(rank.size, dtype=bool), rng.random(chunked) < 0.7]),
    )


def step_counts(b: BatchShape) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A step's segments per rank, its ranks with a chunk and its tokens per rank."""
    n_r = np.bincount(b.rank, minlength=b.num_ranks)
    mixed = np.zeros(b.num_ranks, dtype=bool)
    mixed[b.rank[~b.is_decode]] = True
    return n_r, mixed, np.bincount(b.rank, weights=b.new_tokens.astype(np.float64))


def chunk_rank_shapes(model: ServingCostModel, rng: np.random.Generator) -> list[MixedShape]:
    """The chunk ranks' shapes of three random steps (`mixed_batch`) as `model` shapes them."""
    shapes = []
    for _ in range(3):
        b = mixed_batch(rng, model.deployment.attn_dp)
        n_r, mixed, tokens_r = step_counts(b)
        got, _ = model._ranks.shapes(StepCounts(b, n_r, mixed, ~mixed & (n_r > 0), tokens_r))
        shapes += [s for s in got if isinstance(s, MixedShape)]
    return shapes


@pytest.mark.parametrize(
    ("deployment", "profile"),
    [
        (
            Deployment(
                name="dp8_tbo_mtp",
                attn_tp=1,
                two_batch_overlap=True,
                mtp_draft_tokens=1,
                mtp_acceptance=(0.8,),
            ),
            "h200-sglang",
        ),
        (Deployment(name="tp8", attn_tp=8), "h200-measured"),
        (Deployment(name="dp8", attn_tp=1), "h200-roofline"),
    ],
)
def test_chunk_ranks_priced_from_parts_stay_close_to_pricing_them_op_by_op(
    deployment: Deployment, profile: str
) -> None:
    p = load_profile(profile)
    parts = ServingCostModel(V3, H200, deployment, p)
    exact = ServingCostModel(V3, H200, deployment, p)
    exact._mixed = exact._ranks.mixed = None  # every chunk rank priced op by op, exactly
    rng = np.random.default_rng(11)
    worst = 0.0
    for i in range(6):  # every rank prefilling, or some (the others decode only)
        b = mixed_batch(rng, deployment.attn_dp, None if i % 2 else max(1, deployment.attn_dp // 2))
        got, want = parts.step_cost(b), exact.step_cost(b)
        # chunk lengths and prefixes round by <= 0.54% (their attention <= 1.1%), decode
        # contexts as a `RankShape`'s; the token-level work, most of a chunk rank's, is
        # interpolated (measured: steps within 0.6%, ranks within 0.7%, mean -0.01%)
        assert got.duration_s == pytest.approx(want.duration_s, rel=0.01)
        np.testing.assert_allclose(got.rank_own_s, want.rank_own_s, rtol=0.01)
        assert got.ops.keys() == want.ops.keys()
        worst = max(worst, abs(got.duration_s / want.duration_s - 1))
    assert worst > 0  # the parts are rounded: a test that cannot tell them apart checks nothing


def test_interpolation_weights_sum_to_one_and_are_exact_at_bucket_centres() -> None:
    for x in (1.0, 3.0, 1000.0, 2000.0, 2047.5, 8192.0, 12_345.6):
        pts = between(x)
        assert sum(w for w, _ in pts) == pytest.approx(1.0)
        assert sum(w * c for w, c in pts) == pytest.approx(x, rel=1e-12)
        assert all(0 < w <= 1 for w, _ in pts)
    assert between(centre(176)) == ((1.0, centre(176)),)
    assert between(0.0) == ((1.0, 0.0),)


def test_mtp_kernels_through_a_memo_price_exactly_as_without() -> None:
    d = Deployment(name="dp8_mtp", attn_tp=1, mtp_draft_tokens=2, mtp_acceptance=(0.8, 0.6))
    cm = ServingCostModel(V3, H200, d, load_profile("h200-sglang"))
    memo: BoundedCache[tuple[object, ...], OpTime] = BoundedCache(100)
    rng = np.random.default_rng(5)
    for _ in range(3):  # a miss, then hits for the same tokens
        n = int(rng.integers(1, 40))
        s = RankSegments(
            q=np.full(n, 3.0),
            k=rng.integers(100, 9000, n).astype(np.float64),
            is_decode=np.ones(n, dtype=bool),
            path=np.zeros(n, dtype=np.int8),
        )
        for _ in range(2):
            want = decode_ops(cm.pricer, cm.ctx, d, s)
            assert decode_ops(cm.pricer, cm.ctx, d, s, memo.get) == want
            chunk = (float(rng.integers(16, 8192)), float(rng.choice([0, 5000])), 1.0)
            want = chunk_token_ops(cm.pricer, cm.ctx, d, *chunk)
            assert chunk_token_ops(cm.pricer, cm.ctx, d, *chunk, memo.get) == want
    assert len(memo) > 0


def test_a_repeated_shape_is_its_memoised_work_the_same_a_fresh_pricer_gives() -> None:
    d = Deployment(name="dp8_mtp", attn_tp=1, mtp_draft_tokens=1, mtp_acceptance=(0.8,))
    model = ServingCostModel(V3, H200, d, load_profile("h200-sglang"))
    rng = np.random.default_rng(5)
    batches = [mixed_batch(rng, d.attn_dp) for _ in range(3)]
    first = [model.step_cost(b) for b in batches]
    again = [model.step_cost(b) for b in batches]  # every shape met before: from the memo
    fresh = ServingCostModel(V3, H200, d, load_profile("h200-sglang"))
    for b, x, y in zip(batches, first, again, strict=True):
        z = fresh.step_cost(b)  # priced part by part again, in another order of steps
        assert x.duration_s == y.duration_s == z.duration_s
        assert x.ops == y.ops == z.ops
        np.testing.assert_array_equal(x.rank_own_s, z.rank_own_s)
    assert model._mixed is not None
    shape = next(iter(model._mixed._works._entries))
    work = model._mixed.work(shape)
    assert model._mixed.work(shape) is work  # the same work, its merged ops computed once
    assert work.ops is work.ops


def test_a_steps_shapes_priced_together_are_each_shapes_work_priced_alone() -> None:
    """`works` looks a step's new shapes up once and prices the chunk sets and kernel parts
    they lack together, as arrays: each work the same, to the last bit, as `work` gives one
    shape at a time on a fresh model, a shape met twice in one call included (priced twice
    there: equal works)."""
    d = Deployment(name="dp8_mtp", attn_tp=1, mtp_draft_tokens=1, mtp_acceptance=(0.8,))
    profile = load_profile("h200-sglang")
    together = ServingCostModel(V3, H200, d, profile)
    alone = ServingCostModel(V3, H200, d, profile)
    shapes = chunk_rank_shapes(together, np.random.default_rng(9))
    assert together._mixed is not None and alone._mixed is not None
    batch = [*shapes, shapes[0], shapes[3]]  # two met again in the same call
    works = together._mixed.works(batch)
    assert works[-2] == works[0] and works[-1] == works[3]
    for shape, work in zip(batch, works, strict=True):
        one = alone._mixed.work(shape)
        assert (work.seconds, work.moe_s) == (one.seconds, one.moe_s)
        assert work.ops == one.ops
    assert together._mixed.works(batch[:2]) == works[:2]  # from the memo now


def test_chunk_rank_seconds_added_from_priced_parts_are_their_works_seconds() -> None:
    """`seconds` adds a shape's parts' seconds where each was priced before, and prices the
    rest through `works`: each figure the same float as the shape's work on a fresh model,
    for shapes met before, shapes new but made of parts met before (their tokens moved
    between the same bucket centres), and shapes with new parts."""
    d = Deployment(name="dp8_mtp", attn_tp=1, mtp_draft_tokens=1, mtp_acceptance=(0.8,))
    profile = load_profile("h200-sglang")
    model, fresh = (ServingCostModel(V3, H200, d, profile) for _ in range(2))
    assert model._mixed is not None and fresh._mixed is not None
    shapes = chunk_rank_shapes(model, np.random.default_rng(17))
    moved = []  # new shapes whose parts are all priced: tokens between the same two centres
    for s in shapes:
        (_, lo), *rest = between(s.tokens)
        if rest:
            moved.append(s._replace(tokens=(lo + rest[0][1]) / 2))
    assert moved
    priced: list[int] = []
    works = model._mixed.works

    def spy(new: list[MixedShape]) -> list:
        priced.append(len(new))
        return works(new)

    model._mixed.works = spy  # type: ignore[method-assign]
    first = model._mixed.seconds(shapes)
    assert priced == [len(shapes)]  # every part new: all through `works`
    both = [*shapes, *moved, *shapes[:2]]
    again = model._mixed.seconds(both)
    assert priced == [len(shapes)]  # every part priced before: none through `works`
    assert again[: len(shapes)] == first
    other = MixedShape(shapes[0].decode, shapes[1].chunks, 4_321.0, 0.0, 7.0)
    assert model._mixed.seconds([other]) == [fresh._mixed.work(other).seconds]
    assert priced[-1] == 1  # new token and head parts priced
    for shape, s in zip(both, again, strict=True):
        assert s == fresh._mixed.work(shape).seconds


def test_a_step_run_whole_prices_each_rank_as_its_shapes_work_does() -> None:
    """A step of several chunk ranks that runs whole (no two-batch overlap here) takes its
    chunk ranks' seconds from their parts and its decode ranks' from the decode table, and
    assembles only its slowest rank's work: every rank's seconds the same floats, and the
    step's rank ops the same, as pricing each rank's shape's work on a fresh model gives."""
    d = Deployment(name="dp8_mtp", attn_tp=1, mtp_draft_tokens=1, mtp_acceptance=(0.8,))
    profile = load_profile("h200-sglang")
    model, fresh = (ServingCostModel(V3, H200, d, profile) for _ in range(2))
    assert fresh._mixed is not None
    whole = model._ranks.whole_with_chunks
    calls: list[int] = []

    def spy(*args: object) -> tuple:
        calls.append(1)
        return whole(*args)  # type: ignore[arg-type]

    model._ranks.whole_with_chunks = spy  # type: ignore[method-assign]
    rng = np.random.default_rng(23)
    for _ in range(8):  # some ranks prefill, the others decode only; or every rank prefills
        b = mixed_batch(rng, d.attn_dp, int(rng.integers(2, d.attn_dp + 1)))
        got = model.step_cost(b)
        n_r, mixed, tokens_r = step_counts(b)
        sums = decode_sums(b, n_r, fresh._decode_path)
        assert sums is not None  # the decode side counted: the path under test
        counts = StepCounts(b, n_r, mixed, ~mixed & (n_r > 0), tokens_r, sums)
        shapes, index = fresh._ranks.shapes(counts)
        n_mixed = int(mixed.sum())
        works = [*fresh._mixed.works(shapes[:n_mixed]), *map(fresh._price_rank, shapes[n_mixed:])]
        want = np.asarray([w.seconds for w in works] + [0.0])[index]
        np.testing.assert_array_equal(got.rank_own_s, want)
        crit_ops = works[int(index[int(want.argmax())])].ops
        assert {k: got.ops[k] for k in crit_ops} == crit_ops
    assert len(calls) == 8  # every step took the path under test
