"""Two-batch overlap's split of a rank's step, as SGLang's two_batch_overlap.py makes it."""

from __future__ import annotations

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.batch import BatchShape
from sim.cost.layer_ops import RankSegments
from sim.cost.micro_batches import split_in_two
from sim.cost.serving import ServingCostModel
from sim.cost.step_ranks import StepCounts
from sim.specs.deployment import Deployment


def segments(q: list[int], k: list[int], decode: list[bool]) -> RankSegments:
    n = len(q)
    return RankSegments(
        q=np.array(q, dtype=float),
        k=np.array(k, dtype=float),
        is_decode=np.array(decode),
        path=np.zeros(n, dtype=np.int8),
    )


def test_equal_prompts_stay_whole_two_per_micro_batch() -> None:
    """Four 4,096-token prompts: two whole prompts in each micro-batch (balanced-sum split by
    requests), not every prompt cut in half."""
    first, second = split_in_two(segments([4096] * 4, [4096] * 4, [False] * 4))
    for part in (first, second):
        assert part.q.tolist() == [4096, 4096]
        assert part.k.tolist() == [4096, 4096]
        assert part.samples is not None and part.samples.all()


def test_one_prompt_is_cut_at_its_midpoint() -> None:
    """A lone chunk cannot split by requests: SGLang's two-chunk split cuts it at the token
    midpoint; the first part ends where the second starts and only the second samples."""
    first, second = split_in_two(segments([3001], [5001], [False]))
    assert (first.q.tolist(), first.k.tolist()) == ([1500], [3500])
    assert (second.q.tolist(), second.k.tolist()) == ([1501], [5001])
    assert first.samples is not None and second.samples is not None
    assert not first.samples.any() and second.samples.all()


def test_an_unbalanced_batch_cuts_the_chunk_that_straddles_the_midpoint() -> None:
    """[4096, 100]: the best split by requests leaves 98% of the tokens on one side (outside
    SGLang's 0.48 threshold), so the batch is cut at 2,098 tokens, inside the long prompt."""
    first, second = split_in_two(segments([4096, 100], [4096, 100], [False, False]))
    assert first.q.tolist() == [2098]
    assert second.q.tolist() == [1998, 100]
    assert first.tokens == second.tokens == 2098  # the midpoint of 4,196 tokens


def test_a_nearly_balanced_batch_keeps_its_requests_whole() -> None:
    """[2000, 1000, 1100]: the split after the first prompt leaves 48.8% on the left, inside
    [0.48, 0.52]: no chunk is cut."""
    first, second = split_in_two(segments([2000, 1000, 1100], [2000] * 3, [False] * 3))
    assert first.q.tolist() == [2000]
    assert second.q.tolist() == [1000, 1100]


def test_decode_requests_ride_after_the_chunks() -> None:
    """An extend batch lists its chunks first and then the decode requests that run with them
    (SGLang's mixed batch); one 2,000-token chunk with 100 decode requests is cut at the
    midpoint (1,050 tokens), the decode requests all in the second micro-batch."""
    s = segments([2000] + [1] * 100, [2000] + [3000] * 100, [False] + [True] * 100)
    first, second = split_in_two(s)
    assert first.q.tolist() == [1050] and not first.is_decode.any()
    assert second.q[0] == 950 and int(second.is_decode.sum()) == 100


def test_decode_batches_halve_by_requests() -> None:
    """A decode-only batch is halved by requests (the first takes the odd one out)."""
    first, second = split_in_two(segments([1] * 5, [100, 500, 300, 200, 400], [True] * 5))
    assert sorted(first.k.tolist() + second.k.tolist()) == [100, 200, 300, 400, 500]
    assert (len(first.q), len(second.q)) == (3, 2)


def test_whole_prompt_micro_batches_price_each_half_at_half_the_rank() -> None:
    """On the published H800 profile the 4K prefill rank's two micro-batches (two whole prompts
    each) are equal, and together cost the whole rank's MoE-layer work to within 1%; cut in
    halves, the second half's queries see the first half's keys and the halves differ."""
    model, gpu = load_model("deepseek-v3"), load_gpu("h800")
    d = Deployment(name="p", nodes=4, attn_tp=1, moe_ep=32, two_batch_overlap=True)
    cm = ServingCostModel(model, gpu, d, load_profile("h800-published"))
    ranks, per = 32, 4
    batch = BatchShape(
        num_ranks=ranks,
        rank=np.repeat(np.arange(ranks), per),
        new_tokens=np.full(ranks * per, 4096),
        kv_tokens=np.full(ranks * per, 4096),
        is_decode=np.zeros(ranks * per, dtype=bool),
    )
    n_r = np.full(ranks, per)
    mixed, busy = np.ones(ranks, dtype=bool), np.zeros(ranks, dtype=bool)
    shapes, _ = cm._ranks.shapes(StepCounts(batch, n_r, mixed, busy, n_r * 4096.0))
    first, second = cm._tbo.parts_s(shapes[0])
    assert first == pytest.approx(second, rel=1e-9)
    assert first + second == pytest.approx(cm._rank_work(shapes[0]).moe_s, rel=0.01)
