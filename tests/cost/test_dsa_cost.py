"""DSA inside a step: indexer and sparse-attention work in the tables' convention, one slot count
for pricing and policy, and extends reported under prefill attention."""

from __future__ import annotations

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost import mla
from sim.cost.attention_ops import op_at
from sim.cost.batch import BatchShape
from sim.cost.dispatch import EXPAND, SPARSE_ABSORB, Segments, choose_paths
from sim.cost.memory import kv_bytes_per_token
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment
from tests.cost.calibrated_query import estimate
from tests.cost.pricer_spy import spied

V32, H800 = load_model("deepseek-v3.2"), load_gpu("h800")
H800_PUB = load_profile("h800-published")


def one_segment(q: int, k: int, ranks: int = 16, decode: bool = False) -> BatchShape:
    return BatchShape(
        num_ranks=ranks,
        rank=np.zeros(1, dtype=np.int64),
        new_tokens=np.array([q]),
        kv_tokens=np.array([k]),
        is_decode=np.array([decode]),
    )


def dp(**kw: object) -> Deployment:
    return Deployment(name="dp", nodes=2, attn_tp=1, **kw)  # type: ignore[arg-type]


def test_indexer_prefill_table_point_comes_back_exactly() -> None:
    """Published DSA indexer: 4096 new tokens over an 8192-token cache, 366.418 us per layer.
    The step counts the indexer's causal pairs, as the table does."""
    cm = ServingCostModel(V32, H800, dp(), H800_PUB)
    calls = spied(cm)
    cm.step_cost(one_segment(4096, 8192))
    (score,) = [c for c in calls if c[0] == "dsa_indexer_prefill"]
    flops, bytes_ = op_at("dsa_indexer_prefill", score[1]).work(None, 1.0)
    assert (score[2], score[3]) == pytest.approx((flops, bytes_), rel=1e-12)
    assert score[5].seconds == pytest.approx(366.418e-6, rel=1e-9)
    assert score[5].source == "published" and not score[5].extrapolated


def test_sparse_extend_is_prefill_attention() -> None:
    cm = ServingCostModel(V32, H800, dp(), H800_PUB)
    step = cm.step_cost(one_segment(4096, 8192))  # max length > 2048: sparse under SGLang
    assert step.ops["attn_decode"].seconds == 0.0
    assert step.ops["attn_prefill"].seconds > 0 and step.ops["attn_prefill"].source == "published"
    decode = cm.step_cost(one_segment(1, 8192, decode=True))
    assert decode.ops["attn_decode"].seconds > 0 and "attn_prefill" not in decode.ops


def test_policy_and_pricing_count_the_same_sparse_slots() -> None:
    """128 new tokens after 896 cached ones: with the ideal min(L, k) pairs absorb would look
    cheaper than expand; the kernel visits all 2048 top-k slots per token, which is what the
    step prices, so flops_optimal expands."""
    topk, q, k = V32.dsa.index_topk, 128, 1024  # type: ignore[union-attr]
    m, h = V32.mla_spec, V32.num_heads
    ideal = mla.absorb_flops(m, q, k, heads=h, pairs=mla.sparse_pairs(q, k, topk))
    expand = mla.expand_flops(m, q, k, heads=h)
    assert ideal < expand < mla.absorb_flops(m, q, k, heads=h, pairs=mla.sparse_slots(q, topk))
    seg = Segments(new_tokens=np.array([q]), kv_tokens=np.array([k]), is_decode=np.array([False]))
    assert list(choose_paths("flops_optimal", V32, seg, sparse=True)) == [EXPAND]
    # the same segment forced onto the sparse path is priced over q x topk slots
    cm = ServingCostModel(V32, H800, dp(), H800_PUB)
    calls = spied(cm)
    cm.step_cost(one_segment(q, 40_000))  # long cache: SGLang runs the extend sparse
    (attn,) = [c for c in calls if c[0] == "dsa_attn_prefill"]
    assert attn[2] == pytest.approx(q * topk * mla.absorb_pair_flops(m, h), rel=1e-12)
    long = Segments(
        new_tokens=np.array([q]), kv_tokens=np.array([40_000]), is_decode=np.array([False])
    )
    assert list(choose_paths("sglang", V32, long, sparse=True)) == [SPARSE_ABSORB]


def test_indexer_cache_follows_the_models_index_head_dim() -> None:
    dsa = V32.dsa.model_copy(update={"index_head_dim": 64})  # type: ignore[union-attr]
    narrow = V32.model_copy(update={"dsa": dsa})
    d = Deployment(name="d")
    per_layer = (kv_bytes_per_token(V32, d) - kv_bytes_per_token(narrow, d)) / V32.num_layers
    assert per_layer == 128 - 64  # FP8 keys, the fp32 scale unchanged


def test_sparse_decode_has_its_own_roofline_efficiency() -> None:
    """Without a table, sparse (DSA) decode attention is priced at the profile's sparse-decode
    factor (InferSim's FlashMLA sparse decode points: ~0.38 of H800's peak), not at dense
    attention's; dense and sparse prefill keep the attention factor."""
    from sim.cost.calibrated import CalibratedCost

    profile = load_profile("h200-roofline")
    r = profile.roofline
    sparse = r.sparse_decode_compute_efficiency
    assert sparse is not None and "sparse (DSA) decode" in sparse.source
    assert 0.3 < sparse.value < 0.45 < r.attention_compute_efficiency.value
    cost = CalibratedCost(profile, load_gpu("h200"))
    attrs = {"batch": 64, "kv_len": 8192, "s_q": 1, "topk": 2048, "heads": 128, "kv_dtype": "bf16"}
    flops = 1e12  # compute-bound whatever the bytes
    decode = estimate(cost, "dsa_attn_decode", key=attrs, point={}, flops=flops, bytes_=1.0)
    peak = load_gpu("h200").peak_flops_per_s("bf16")
    launch = r.launch_overhead_us.value * 1e-6
    assert decode.seconds == pytest.approx(flops / (peak * sparse.value) + launch)
    prefill_attrs = {"s_q": 4096, "s_kv": 4096, "topk": 2048, "heads": 128}
    prefill = estimate(cost, "dsa_attn_prefill", key=prefill_attrs, point={}, flops=flops, bytes_=1)
    expected = flops / (peak * r.attention_compute_efficiency.value) + launch
    assert prefill.seconds == pytest.approx(expected)


def test_top_k_selection_is_priced_unless_the_indexer_table_times_it() -> None:
    """The published indexer tables (InferSim's fp8_mqa_logits) time the logits kernel only:
    the top-k selection is priced on its own, one read of the fp32 logits and a write of the
    top-k int32 indices. kernels_calib's indexer (torch_bmm_topk) times both: no second op."""
    d = Deployment(name="ep16", nodes=2, attn_tp=1)
    cm = ServingCostModel(V32, H800, d, H800_PUB)
    calls = spied(cm)
    cm.step_cost(one_segment(1, 32768, decode=True))
    ((_, _, flops, nbytes, _, t),) = [c for c in calls if c[0] == "dsa_topk"]
    assert flops == 0.0 and nbytes == 4.0 * 32768 + 4.0 * 2048
    assert t.source == "roofline" and t.seconds > 0
    measured = ServingCostModel(V32, load_gpu("h200"), d, load_profile("h200-measured"))
    calls = spied(measured)
    measured.step_cost(one_segment(1, 32768, decode=True))
    assert not [c for c in calls if c[0] == "dsa_topk"]
