"""One rank's `mixed_shapes` (the app's tensor-parallel deployments) takes its own, shorter
path: it must shape the rank exactly as the many-rank path does."""

from __future__ import annotations

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.batch import BatchShape
from sim.cost.mixed_shape import mixed_shapes
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment


def batch(rng: np.random.Generator, ranks: int, mixed_widths: bool) -> BatchShape:
    """Decode requests (width 1, or 1-3 when `mixed_widths`) and 1-3 prompt chunks on each rank,
    some after a cached prefix, some completing their prompt."""
    decode = rng.integers(0, 30, ranks)
    chunks = rng.integers(1, 4, ranks)
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
        b = batch(rng, 4, mixed_widths=trial % 2 == 1)
        tokens_r = np.bincount(b.rank, weights=b.new_tokens, minlength=4)
        everyone = mixed_shapes(b, np.ones(4, bool), [0, 1, 2, 3], cost._paths, tokens_r)
        for r in range(4):
            alone = np.arange(4) == r
            assert mixed_shapes(b, alone, [r], cost._paths, tokens_r) == [everyone[r]]
