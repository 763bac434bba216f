"""A step's chunk parts priced together as arrays (`sim.cost.chunk_parts`) are `chunk_ops` of
each set, bit for bit, where the rates do not depend on shape; elsewhere they are left to it."""

from __future__ import annotations

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.batch import BatchShape
from sim.cost.chunk_parts import MAX_CHUNKS, chunk_parts
from sim.cost.dispatch import ABSORB, EXPAND, EXPAND_CHUNKED
from sim.cost.mixed_halves import mixed_segments
from sim.cost.mixed_shape import CHUNK_BUCKETS_PER_OCTAVE, Chunk, MixedShape
from sim.cost.rank_work import chunk_attention_ops, chunk_ops
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment

H200 = load_gpu("h200")


def chunk_sets(rng: np.random.Generator, n: int) -> list[tuple[Chunk, ...]]:
    """Sets of 1 to MAX_CHUNKS + 1 chunks at 2^(1/64) bucket centres (as `MixedShape` keeps
    them), most on one expand path, some mixed or absorbed."""
    out = []
    for _ in range(n):
        size = int(rng.integers(1, MAX_CHUNKS + 2))
        path = int(rng.choice([EXPAND, EXPAND, EXPAND_CHUNKED, ABSORB]))
        chunks = []
        for _ in range(size):
            new = 2.0 ** (int(rng.integers(0, 14 * CHUNK_BUCKETS_PER_OCTAVE)) / 64)
            prefix = 0.0 if rng.random() < 0.5 else 2.0 ** (int(rng.integers(0, 900)) / 64)
            p = path if rng.random() < 0.95 else EXPAND_CHUNKED + EXPAND - path
            chunks.append((p, new, new + prefix, bool(rng.random() < 0.7)))
        out.append(tuple(sorted(chunks)))
    return out


DP8_MTP = Deployment(name="dp8_mtp", attn_tp=1, moe_ep=8, mtp_draft_tokens=1, mtp_acceptance=(0.8,))
TP8 = Deployment(name="tp8", attn_tp=8, moe_tp=8, chunked_prefill_tokens=2048)
DP32_BF16 = Deployment(name="dp32_bf16", nodes=4, attn_tp=1, moe_ep=32, weight_dtype="bf16")
DP32_FP4 = Deployment(name="dp32_fp4", nodes=4, attn_tp=1, moe_ep=32, weight_dtype="fp4",
                      mtp_draft_tokens=2, mtp_acceptance=(0.8, 0.6))  # fmt: skip


@pytest.mark.parametrize(
    ("model", "deployment"),
    [
        ("deepseek-v3", DP8_MTP),
        ("deepseek-v3", TP8),
        ("deepseek-v3", DP32_BF16),
        ("kimi-k3", DP32_FP4),
    ],
)
def test_priced_together_they_are_chunk_ops_bit_for_bit(model: str, deployment: Deployment) -> None:
    cm = ServingCostModel(load_model(model), H200, deployment, load_profile("h200-roofline"))
    sets = chunk_sets(np.random.default_rng(len(model) + deployment.attn_tp), 300)
    got = chunk_parts(cm.pricer, cm.ctx, deployment, sets)
    together = 0
    for chunks, ops in zip(sets, got, strict=True):
        one_path = len({c[0] for c in chunks}) == 1 and chunks[0][0] in (EXPAND, EXPAND_CHUNKED)
        assert (ops is not None) == (one_path and len(chunks) <= MAX_CHUNKS)
        if ops is None:
            continue
        together += 1
        s = mixed_segments(MixedShape((), chunks, 0.0, 0.0, 0.0))
        want = chunk_ops(cm.pricer, cm.ctx, deployment, s)
        assert list(ops) == list(want)  # the same ops in the same order
        assert ops == want  # the same seconds, sources, flags and launches, bit for bit
        assert ops["attn_prefill"].launches > 0  # the launch counts are compared too
    assert together > 150  # most sets were priced together: the check compares something


def test_rates_that_depend_on_shape_leave_every_set_to_chunk_ops() -> None:
    d = DP8_MTP
    cm = ServingCostModel(load_model("deepseek-v3"), H200, d, load_profile("h200-sglang"))
    sets = [((EXPAND, 1024.0, 1024.0, True), (EXPAND, 300.0, 2000.0, False))] * 3
    assert chunk_parts(cm.pricer, cm.ctx, d, sets) == [None, None, None]


def test_a_step_of_chunk_ranks_prices_alike_with_and_without_them() -> None:
    from tests.cost.test_mixed_rank import mixed_batch

    d = DP8_MTP.model_copy(update={"two_batch_overlap": True})
    p = load_profile("h200-roofline")
    together, alone = (ServingCostModel(load_model("deepseek-v3"), H200, d, p) for _ in "ab")
    assert alone._mixed is not None
    alone._mixed.prime = lambda shapes: None  # type: ignore[method-assign]
    rng = np.random.default_rng(7)
    for _ in range(4):
        b = mixed_batch(rng, d.attn_dp)
        x, y = together.step_cost(b), alone.step_cost(b)
        assert x.duration_s == y.duration_s and x.ops == y.ops
        np.testing.assert_array_equal(x.rank_own_s, y.rank_own_s)


@pytest.mark.parametrize(
    ("model", "deployment"),
    [("deepseek-v3", DP8_MTP), ("deepseek-v3", TP8), ("kimi-k3", DP32_FP4)],
)
def test_attention_only_is_chunk_attention_ops_bit_for_bit(
    model: str, deployment: Deployment
) -> None:
    cm = ServingCostModel(load_model(model), H200, deployment, load_profile("h200-roofline"))
    sets = chunk_sets(np.random.default_rng(11 + deployment.attn_tp), 200)
    got = chunk_parts(cm.pricer, cm.ctx, deployment, sets, attention_only=True)
    together = 0
    for chunks, ops in zip(sets, got, strict=True):
        if ops is None:
            continue
        together += 1
        s = mixed_segments(MixedShape((), chunks, 0.0, 0.0, 0.0))
        want = chunk_attention_ops(cm.pricer, cm.ctx, s)
        assert list(ops) == list(want) and ops == want
    assert together > 100


def several_chunks_batch(rng: np.random.Generator, ranks: int) -> BatchShape:
    """1-40 verify requests and 1-4 prompt chunks (some after a prefix) on every rank."""
    counts, chunks = rng.integers(1, 41, ranks), rng.integers(1, 5, ranks)
    dec_rank, pre_rank = np.repeat(np.arange(ranks), counts), np.repeat(np.arange(ranks), chunks)
    q = rng.integers(16, 4097, pre_rank.size)
    kv = q + rng.choice([0, 0, 0, 9000], pre_rank.size)  # SGLang expands at 0 or past 8,192
    n_dec, n_pre = dec_rank.size, pre_rank.size
    return BatchShape(
        num_ranks=ranks,
        rank=np.concatenate([dec_rank, pre_rank]),
        new_tokens=np.concatenate([np.full(n_dec, 2), q]),
        kv_tokens=np.concatenate([rng.integers(100, 20_000, n_dec), kv]),
        is_decode=np.concatenate([np.ones(n_dec, dtype=bool), np.zeros(n_pre, dtype=bool)]),
        samples_token=np.concatenate([np.ones(n_dec, dtype=bool), rng.random(n_pre) < 0.7]),
    )


def test_a_step_prices_alike_with_and_without_its_halves_primed() -> None:
    d = DP8_MTP.model_copy(update={"two_batch_overlap": True})
    p = load_profile("h200-roofline")
    together, alone = (ServingCostModel(load_model("deepseek-v3"), H200, d, p) for _ in "ab")
    assert together._mixed is not None and alone._mixed is not None
    alone._mixed.prime_halves = lambda shapes: None  # type: ignore[method-assign]
    primed = []
    price_together = together._mixed._price_together

    def spy(missing: dict, attention_only: bool) -> int:  # type: ignore[type-arg]
        stored = price_together(missing, attention_only)
        if attention_only:  # the sets priced together (the rest are left to op by op)
            primed.append(sum(k in together._mixed._parts for k in missing))  # type: ignore[union-attr]
        return stored

    together._mixed._price_together = spy  # type: ignore[method-assign]
    rng = np.random.default_rng(3)
    for _ in range(4):
        b = several_chunks_batch(rng, d.attn_dp)
        x, y = together.step_cost(b), alone.step_cost(b)
        assert x.duration_s == y.duration_s and x.overlap_saved_s == y.overlap_saved_s
        assert x.ops == y.ops
        np.testing.assert_array_equal(x.rank_own_s, y.rank_own_s)
    assert sum(primed) >= 32  # halves were priced together: the comparison compares something
    # and each rank's halves, primed or not, are what a fresh model prices op by op
    fresh = ServingCostModel(load_model("deepseek-v3"), H200, d, p)
    assert fresh._mixed is not None
    halves = together._mixed._halves._entries
    for (decode, chunks), both in halves.items():
        assert both == fresh._mixed.halves_moe_s(MixedShape(decode, chunks, 0.0, 0.0, 0.0))
    assert len(halves) >= 10
