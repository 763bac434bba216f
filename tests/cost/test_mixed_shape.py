"""One rank's `mixed_shapes` (the app's tensor-parallel deployments) takes its own, shorter
path: it must shape the rank exactly as the many-rank path does."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.batch import BatchShape
from sim.cost.decode_sums import decode_sums
from sim.cost.mixed_shape import mixed_shapes
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment


def dp4() -> ServingCostModel:
    """DeepSeek-V3 on four attention ranks of TP2 (H200, the roofline profile)."""
    return ServingCostModel(
        load_model("deepseek-v3"),
        load_gpu("h200"),
        Deployment(name="dp4", attn_tp=2),
        load_profile("h200-roofline"),
    )


def batch(
    rng: np.random.Generator, ranks: int, mixed_widths: bool, max_chunks: int = 3
) -> BatchShape:
    """Decode requests (width 1, or 1-3 when `mixed_widths`) and 1 to `max_chunks` prompt
    chunks on each rank, some after a cached prefix, some completing their prompt."""
    decode = rng.integers(0, 30, ranks)
    chunks = rng.integers(1, max_chunks + 1, ranks)
    d_rank, c_rank = np.repeat(np.arange(ranks), decode), np.repeat(np.arange(ranks), chunks)
    width = rng.integers(1, 4, d_rank.size) if mixed_widths else np.ones(d_rank.size, np.int64)
    chunk_q = rng.integers(16, 9000, c_rank.size)
    chunk_kv = chunk_q + rng.choice([0, 0, 700, 40_000], c_rank.size)
    return BatchShape(
        num_ranks=ranks,
        rank=np.concatenate([d_rank, c_rank]),
        new_tokens=np.concatenate([width, chunk_q]),
        kv_tokens=np.concatenate([rng.integers(100, 30_000, d_rank.size), chunk_kv]),
        is_decode=np.concatenate([np.ones(d_rank.size, bool), np.zeros(c_rank.size, bool)]),
        samples_token=np.concatenate([np.ones(d_rank.size, bool), rng.random(c_rank.size) < 0.6]),
    )


def segments(b: BatchShape, sel: np.ndarray | slice) -> BatchShape:
    """The step of `b`'s segments `sel` (indices, a mask or a slice), in that order."""
    return BatchShape(
        num_ranks=b.num_ranks,
        rank=b.rank[sel],
        new_tokens=b.new_tokens[sel],
        kv_tokens=b.kv_tokens[sel],
        is_decode=b.is_decode[sel],
        samples_token=None if b.samples_token is None else b.samples_token[sel],
    )


@pytest.mark.parametrize("policy", ["sglang", "vllm", "flops_optimal"])
@pytest.mark.parametrize("model", ["deepseek-v3", "deepseek-v3.2"])
def test_one_ranks_shape_is_the_shape_the_many_rank_path_gives_it(policy: str, model: str) -> None:
    cost = ServingCostModel(
        load_model(model),
        load_gpu("h200"),
        Deployment(name="dp4", attn_tp=2, mla_policy=policy),
        load_profile("h200-roofline"),
    )
    rng = np.random.default_rng(5)
    for trial in range(8):
        # a few chunks (rounded one at a time) or more than FEW_CHUNKS (rounded as arrays)
        b = batch(rng, 4, mixed_widths=trial % 2 == 1, max_chunks=3 if trial < 4 else 40)
        tokens_r = np.bincount(b.rank, weights=b.new_tokens, minlength=4)
        everyone = mixed_shapes(b, np.ones(4, bool), [0, 1, 2, 3], cost._paths, tokens_r)
        for r in range(4):
            alone = np.arange(4) == r
            assert mixed_shapes(b, alone, [r], cost._paths, tokens_r) == [everyone[r]]


@pytest.mark.parametrize("policy", ["sglang", "vllm", "flops_optimal"])
def test_a_counted_decode_side_shapes_ranks_as_selecting_their_segments_does(policy: str) -> None:
    """`decode_sums` counts a step's decode side once (its decode segments first, one width and
    path); the chunk ranks' shapes from it are those the segment-selecting path gives."""
    cost = ServingCostModel(
        load_model("deepseek-v3"),
        load_gpu("h200"),
        Deployment(name="dp4", attn_tp=2, mla_policy=policy),
        load_profile("h200-roofline"),
    )
    rng = np.random.default_rng(11)
    counted = 0
    for trial in range(12):
        b = batch(rng, 4, mixed_widths=trial % 3 == 2)
        n_r = np.bincount(b.rank, minlength=4)
        sums = decode_sums(b, n_r, cost._decode_path)
        if trial % 3 == 2:  # decode widths differ: nothing counted
            assert sums is None
            continue
        assert sums is not None
        counted += 1
        assert sums.requests.tolist() == np.bincount(b.rank[b.is_decode], minlength=4).tolist()
        for ranks in ([0, 1, 2, 3], [1, 3], [2]):  # the ranks with chunks
            mixed = np.isin(np.arange(4), ranks)
            step = segments(b, np.flatnonzero(b.is_decode | mixed[b.rank]))
            step_sums = decode_sums(step, np.bincount(step.rank, minlength=4), cost._decode_path)
            assert step_sums is not None
            tokens_r = np.bincount(step.rank, weights=step.new_tokens, minlength=4)
            selected = mixed_shapes(step, mixed, ranks, cost._paths, tokens_r)
            assert mixed_shapes(step, mixed, ranks, cost._paths, tokens_r, step_sums) == selected
    assert counted == 8


def test_decode_sums_needs_the_decode_segments_first() -> None:
    """A batch whose decode segments are not a prefix (or that has no chunk) is not counted."""
    cost = dp4()
    b = batch(np.random.default_rng(2), 4, mixed_widths=False)
    n_r = np.bincount(b.rank, minlength=4)
    assert decode_sums(b, n_r, cost._decode_path) is not None
    flipped = segments(b, slice(None, None, -1))
    assert decode_sums(flipped, n_r, cost._decode_path) is None
    only = segments(b, np.flatnonzero(b.is_decode))
    assert decode_sums(only, np.bincount(only.rank, minlength=4), cost._decode_path) is None


@pytest.mark.parametrize("model", ["deepseek-v3", "deepseek-v3.2"])
def test_a_step_is_priced_the_same_whatever_the_order_of_its_segments(model: str) -> None:
    """Decode segments first (as the engine lists them: their side counted once) or last (each
    user selects them): the same step price, to the last bit."""
    d = Deployment(name="dp4_ep8", attn_tp=2, moe_ep=8, mtp_draft_tokens=1, mtp_acceptance=(0.8,))
    cost = ServingCostModel(load_model(model), load_gpu("h200"), d, load_profile("h200-roofline"))
    rng = np.random.default_rng(3)
    for trial in range(6):
        b = batch(rng, 4, mixed_widths=False)
        # verify width 2; on odd trials ranks 0 and 3 decode only
        b = BatchShape(**{**b.__dict__, "new_tokens": np.where(b.is_decode, 2, b.new_tokens)})
        b = segments(b, b.is_decode | (trial % 2 == 0) | np.isin(b.rank, [1, 2]))
        last = segments(b, np.argsort(b.is_decode, kind="stable"))  # the chunks first
        n_r = np.bincount(b.rank, minlength=4)
        assert decode_sums(b, n_r, cost._decode_path) is not None
        assert decode_sums(last, n_r, cost._decode_path) is None
        first, other = cost.step_cost(b), cost.step_cost(last)
        assert first.duration_s == other.duration_s
        assert first.rank_own_s.tolist() == other.rank_own_s.tolist()
        assert {k: v.seconds for k, v in first.ops.items()} == {
            k: v.seconds for k, v in other.ops.items()
        }


def test_chunk_work_of_one_chunk_is_the_sum_over_its_chunks() -> None:
    """A one-chunk rank's MTP extend figures (read off its chunk) are those the sums over the
    chunks give: its rounded tokens, its expanded tokens, 1 or 0 prompts completed."""
    from sim.cost.memo import round_to_bucket
    from sim.cost.mixed_shape import MixedShape

    rng = np.random.default_rng(5)
    for _ in range(200):
        path, new, done = int(rng.integers(0, 4)), float(rng.integers(1, 9000)), rng.random() < 0.5
        chunk = (path, new, new + float(rng.choice([0, 700, 40_000])), bool(done))
        shape = MixedShape((), (chunk,), new, float(rng.choice([0.0, 2048.0])), 3.0)
        summed = (round_to_bucket(sum(c[1] for c in shape.chunks)), shape.expanded,
                  float(sum(1 for c in shape.chunks if c[3])))  # fmt: skip
        assert shape.chunk_work == summed
        assert type(shape.chunk_work[2]) is float


def test_steps_with_one_decode_group_share_its_key_object() -> None:
    """A chunk rank's decode side recurs from step to step: shaped from a counted decode side,
    equal decode groups are the one object, whose stored part a dict then finds by identity
    (and shaping by selecting segments gives equal groups)."""
    cost = dp4()
    b = batch(np.random.default_rng(3), 4, mixed_widths=False)
    n_r = np.bincount(b.rank, minlength=4)
    tokens_r = np.bincount(b.rank, weights=b.new_tokens, minlength=4)
    shaped = []
    for _ in range(2):  # two steps of the same batch, each shaped anew
        sums = decode_sums(b, n_r, cost._decode_path)
        assert sums is not None
        shaped.append(mixed_shapes(b, np.ones(4, bool), [0, 1, 2, 3], cost._paths, tokens_r, sums))
    first, second = shaped
    assert first == second
    assert any(s.decode for s in first)
    for a, c in zip(first, second, strict=True):
        assert a.decode is c.decode
    by_segments = mixed_shapes(b, np.ones(4, bool), [0, 1, 2, 3], cost._paths, tokens_r)
    assert [s.decode for s in by_segments] == [s.decode for s in first]


def test_a_batch_naming_its_decode_width_prices_as_one_read() -> None:
    """The engine names a mixed batch's verify width (`decode_width`): the decode side counted
    from it, and the step's price, are those the cost model gets by reading the segments."""
    cost = dp4()
    rng = np.random.default_rng(8)
    for _ in range(6):
        b = batch(rng, 4, mixed_widths=False)
        named = replace(b, decode_width=1)
        n_r = np.bincount(b.rank, minlength=4)
        read = decode_sums(b, n_r, cost._decode_path)
        told = decode_sums(named, n_r, cost._decode_path)
        assert read is not None and told is not None
        assert read.n == told.n and read.width == told.width == 1 and read.path == told.path
        for a, c in ((read.requests, told.requests), (read.kv_sum, told.kv_sum)):
            np.testing.assert_array_equal(a, c)
        assert cost.step_cost(named).duration_s == cost.step_cost(b).duration_s
