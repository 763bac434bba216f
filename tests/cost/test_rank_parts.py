"""A rank's work assembled from its parts (`rank_work.rank_parts`) is `rank_ops` op for op, so
pricing a prompt-chunk rank from memoised parts (`sim.cost.mixed_rank`) prices the same ops."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.layer_ops import RankSegments
from sim.cost.memo import BoundedCache
from sim.cost.rank_work import rank_ops, rank_parts, separable, weighted_merge
from sim.cost.rate import OpTime, combine, scale
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment

H200 = load_gpu("h200")


def segments(rng: np.random.Generator, model: ServingCostModel) -> RankSegments:
    """1-40 decode requests (verify width 1 or 2) and 0-3 prompt chunks, MLA paths as the
    deployment's policy picks them."""
    n_dec, n_pre = int(rng.integers(0, 41)), int(rng.integers(0, 4))
    if n_dec + n_pre == 0:
        n_dec = 1
    q_dec = np.full(n_dec, int(rng.integers(1, 3)))
    q_pre = rng.integers(1, 9000, n_pre)
    q = np.concatenate([q_dec, q_pre]).astype(np.int64)
    prefix = np.concatenate([rng.integers(50, 20_000, n_dec), rng.choice([0, 700, 9000], n_pre)])
    k = q + prefix
    dec = np.arange(q.size) < n_dec
    paths = model._paths(q, k, dec)
    samples = np.concatenate([np.ones(n_dec, dtype=bool), rng.random(n_pre) < 0.5])
    return RankSegments(
        q=q.astype(np.float64), k=k.astype(np.float64), is_decode=dec, path=paths, samples=samples
    )


CASES = [
    (
        "deepseek-v3",
        Deployment(name="dp8_mtp", attn_tp=1, mtp_draft_tokens=1, mtp_acceptance=(0.8,)),
        "h200-sglang",
    ),
    ("deepseek-v3", Deployment(name="tp8", attn_tp=8), "h200-measured"),
    ("deepseek-v3", Deployment(name="tp8_sglang", attn_tp=8, engine="sglang"), "h200-sglang"),
    ("deepseek-v3", Deployment(name="tp8_trtllm", attn_tp=8, engine="trtllm"), "h200-trtllm"),
    (
        "deepseek-v3",
        Deployment(name="tp2_unit", attn_tp=2, dense_ffn="unit", lm_head="unit", mla_policy="vllm"),
        "h200-roofline",
    ),
    (
        "kimi-k2",
        Deployment(
            name="flops",
            nodes=2,
            attn_tp=4,
            mla_policy="flops_optimal",
            mtp_draft_tokens=2,
            mtp_acceptance=(0.8, 0.6),
        ),
        None,
    ),
    ("qwen3-235b-a22b", Deployment(name="gqa_tp4", attn_tp=4), None),
]


@pytest.mark.parametrize(("model_name", "deployment", "profile"), CASES)
def test_a_rank_assembled_from_its_parts_prices_rank_ops_op_for_op(
    model_name: str, deployment: Deployment, profile: str | None
) -> None:
    m = load_model(model_name)
    cost = ServingCostModel(m, H200, deployment, load_profile(profile) if profile else None)
    assert separable(cost.ctx)
    rng = np.random.default_rng(3)
    for _ in range(25):
        s = segments(rng, cost)
        whole = rank_ops(cost.pricer, cost.ctx, deployment, H200, s)
        parts = rank_parts(cost.pricer, cost.ctx, deployment, H200, s)
        assert parts.keys() == whole.keys()
        for name, t in whole.items():
            assert parts[name].seconds == pytest.approx(t.seconds, rel=1e-12), name
            assert (parts[name].source, parts[name].extrapolated) == (t.source, t.extrapolated)


def test_weighted_merge_is_chained_scale_and_combine_bit_for_bit() -> None:
    """`weighted_merge` sums in one pass what chaining `scale` and `combine` over the parts
    gives: the same floats, sources, extrapolation flags, and a lone op's own object (its
    detail kept) where no other part names it and its weight is 1."""
    rng = np.random.default_rng(11)
    sources = ["roofline", "published", "measured"]
    for _ in range(300):
        parts = []
        for _ in range(int(rng.integers(1, 7))):
            names = rng.choice(["a", "b", "c", "d"], int(rng.integers(0, 4)), replace=False)
            ops = {
                str(n): OpTime(
                    seconds=float(rng.choice([0.0, rng.random() * 1e-3])),
                    source=str(rng.choice(sources)),
                    extrapolated=bool(rng.random() < 0.3),
                    detail="table",
                )
                for n in names
            }
            parts.append((float(rng.choice([1.0, rng.random()])), ops))
        want: dict[str, OpTime] = {}
        for w, ops in parts:
            for name, t in ops.items():
                t = t if w == 1.0 else scale(t, w)
                want[name] = combine(want[name], t) if name in want else t
        assert weighted_merge(parts) == want


@pytest.mark.parametrize(("model_name", "deployment", "profile"), CASES)
def test_rank_ops_through_a_pieces_memo_are_the_same_ops_bit_for_bit(
    model_name: str, deployment: Deployment, profile: str | None
) -> None:
    """The memo keeps a rank's and its MTP passes' memory-bound kernels by their tokens, their
    expanded cached tokens and whether the rank decodes only: ranks that share the first but
    differ in the others, or share all three over other contexts, each get exactly the ops
    pricing gives them alone."""
    m = load_model(model_name)
    cost = ServingCostModel(m, H200, deployment, load_profile(profile) if profile else None)
    memo: BoundedCache[tuple[object, ...], OpTime] = BoundedCache(10_000)
    rng = np.random.default_rng(5)

    def rank(dec_k: np.ndarray, width: int, chunks: list[tuple[int, int]]) -> RankSegments:
        """Decode requests over contexts `dec_k`, and (tokens, prefix) prompt chunks."""
        q = np.array([width] * dec_k.size + [c for c, _ in chunks], dtype=np.int64)
        k = np.concatenate([dec_k, [c + p for c, p in chunks]]).astype(np.int64)
        dec = np.arange(q.size) < dec_k.size
        return RankSegments(
            q=q.astype(np.float64),
            k=k.astype(np.float64),
            is_decode=dec,
            path=cost._paths(q, k, dec),
        )

    lookups = 0

    def counted(key: tuple[object, ...], price: Callable[[], OpTime]) -> OpTime:
        nonlocal lookups
        lookups += 1
        return memo.get(key, price)

    for _ in range(20):
        n, width, j = int(rng.integers(1, 40)), int(rng.integers(1, 3)), int(rng.integers(1, 300))
        ctx = rng.integers(50, 20_000, n + j)
        chunk = width * j  # as many tokens as j more decode requests
        family = [
            rank(ctx, width, []),  # decode only
            rank(ctx[:n], width, [(chunk, 300)]),  # the same tokens, not decode only
            rank(ctx[:n] + 777, width, [(chunk, 300)]),  # ... over other contexts
            rank(ctx[:n], width, [(chunk, 0)]),  # the same tokens, other expanded tokens
            rank(ctx[:n], width, [(chunk, 9_000)]),
            rank(ctx + 5, width, []),  # decode only again, other contexts
        ]
        for seg in family:
            alone = rank_ops(cost.pricer, cost.ctx, deployment, H200, seg)
            assert rank_ops(cost.pricer, cost.ctx, deployment, H200, seg, counted) == alone
    assert len(memo) < lookups / 2  # most pieces were met before
