"""Step cost of a lock-step unit: physics the simulator relies on."""

from __future__ import annotations

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.batch import BatchShape
from sim.cost.overlap import moe_layers_s
from sim.cost.rank_shape import RankShape, rank_shape
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment

V3, V32 = load_model("deepseek-v3"), load_model("deepseek-v3.2")
H800, H200 = load_gpu("h800"), load_gpu("h200")
H800_PUB = load_profile("h800-published")


def decode_batch(ranks: int, per_rank: int, kv: int | list[int], s_q: int = 1) -> BatchShape:
    n = ranks * per_rank
    kv_arr = np.full(n, kv) if isinstance(kv, int) else np.repeat(np.array(kv), per_rank)
    return BatchShape(
        num_ranks=ranks,
        rank=np.repeat(np.arange(ranks), per_rank),
        new_tokens=np.full(n, s_q),
        kv_tokens=kv_arr,
        is_decode=np.ones(n, dtype=bool),
    )


def dp(nodes: int = 2, **kw: object) -> Deployment:
    return Deployment(name="dp", nodes=nodes, attn_tp=1, **kw)  # type: ignore[arg-type]


def test_flashmla_published_point_reproduced_in_a_step() -> None:
    cm = ServingCostModel(V3, H800, dp(), H800_PUB)
    step = cm.step_cost(decode_batch(16, 64, 4096))
    core = step.ops["attn_decode"]
    assert core.source == "published" and not core.extrapolated
    # InferSim's FlashMLA CSV: batch 64, kv 4096 -> 155.153 us per layer, 61 MLA layers
    assert core.seconds == pytest.approx(61 * 155.153e-6, rel=1e-6)


def test_ops_carry_sources() -> None:
    step = ServingCostModel(V3, H800, dp(), H800_PUB).step_cost(decode_batch(16, 64, 2048))
    sources = {t.source for t in step.ops.values() if t.seconds > 0}
    assert "published" in sources and sources <= {"published", "roofline", "measured"}
    rl = ServingCostModel(V3, H800, dp()).step_cost(decode_batch(16, 64, 2048))
    assert {t.source for t in rl.ops.values()} == {"roofline"}


def test_one_long_context_slows_the_whole_lock_step_group() -> None:
    cm = ServingCostModel(V3, H800, dp(), H800_PUB)
    even = cm.step_cost(decode_batch(16, 32, 2000))
    skewed = cm.step_cost(decode_batch(16, 32, [2000] * 15 + [30000]))
    assert skewed.duration_s > 1.3 * even.duration_s
    assert skewed.rank_imbalance > 2.0 and even.rank_imbalance == pytest.approx(1.0)
    assert int(np.argmax(skewed.rank_own_s)) == 15


def test_dp_attention_amortises_expert_weights_tp_does_not() -> None:
    tp = ServingCostModel(V3, H200, Deployment(name="tp8", attn_tp=8, moe_tp=8))
    dpa = ServingCostModel(V3, H200, Deployment(name="dp8", attn_tp=1, moe_ep=8))
    # same 64 requests per GPU: TP8 is one rank of 64, DP8 eight ranks of 64
    t_tp = tp.step_cost(decode_batch(1, 64, 4000)).duration_s
    t_dp = dpa.step_cost(decode_batch(8, 64, 4000)).duration_s
    tokens_per_s_per_gpu_tp, tokens_per_s_per_gpu_dp = 64 / t_tp / 8, 512 / t_dp / 8
    assert tokens_per_s_per_gpu_dp > 3 * tokens_per_s_per_gpu_tp


def test_mtp_verify_costs_less_than_s_times_but_more_than_one() -> None:
    cm = ServingCostModel(V3, H800, dp(mtp_draft_tokens=1, mtp_acceptance=(0.8,)), H800_PUB)
    one = cm.step_cost(decode_batch(16, 64, 4096, s_q=1)).ops["attn_decode"].seconds
    two = cm.step_cost(decode_batch(16, 64, 4096, s_q=2)).ops["attn_decode"].seconds
    assert 1.2 * one < two < 2.0 * one  # MLA decode sits near the ridge: verify is not free


def test_mtp_draft_keeps_its_rank_work_and_its_routed_experts() -> None:
    """The draft module's attention/FFN (rank side) and its routed experts (unit side) are two
    entries of the step; neither replaces the other."""
    cm = ServingCostModel(V3, H800, dp(mtp_draft_tokens=1, mtp_acceptance=(0.8,)), H800_PUB)
    step = cm.step_cost(decode_batch(16, 64, 4096, s_q=2))
    rank_side, unit_side = step.ops["mtp_draft"].seconds, step.ops["mtp_draft_moe"].seconds
    assert rank_side > 0 and unit_side > 0
    total = sum(t.seconds for t in step.ops.values()) - step.overlap_saved_s
    assert step.duration_s == pytest.approx(total, rel=1e-12)


def test_two_batch_overlap_hides_comm_at_large_batch_only() -> None:
    off = ServingCostModel(V3, H800, dp(nodes=4))
    on = ServingCostModel(V3, H800, dp(nodes=4, two_batch_overlap=True))
    big, small = decode_batch(32, 256, 2000), decode_batch(32, 4, 2000)
    assert on.step_cost(big).duration_s < off.step_cost(big).duration_s
    assert on.step_cost(big).overlap_saved_s > 0
    assert on.step_cost(small).duration_s > 0.9 * off.step_cost(small).duration_s


def test_each_micro_batch_reads_the_attention_weights_again() -> None:
    """Under two-batch overlap a decode rank's half batch re-reads its projection weights, so it
    costs more than half the full batch; a prefill rank's (compute-bound) work splits into
    two micro-batches of whole prompts (two-chunk split: one prompt per rank is cut at its
    midpoint), each about half the whole. Only the MoE layers' work is split
    (the dense layers and the head run once, whole)."""
    cm = ServingCostModel(V3, H800, dp(two_batch_overlap=True), H800_PUB)

    def shape(batch: BatchShape) -> RankShape:
        sel = batch.rank == 0
        q, k, dec = batch.new_tokens[sel], batch.kv_tokens[sel], batch.is_decode[sel]
        return rank_shape(q, k, dec, cm._paths(q, k, dec), None)

    def rank_s(batch: BatchShape) -> float:
        return moe_layers_s(V3, cm._rank_work(shape(batch)).ops)

    full = rank_s(decode_batch(16, 256, 2000))
    half = sum(cm._tbo.parts_s(shape(decode_batch(16, 256, 2000)))) / 2
    assert 0.55 * full < half < 0.9 * full
    assert half == pytest.approx(rank_s(decode_batch(16, 128, 2000)), rel=1e-3)
    prefill = BatchShape(
        num_ranks=16,
        rank=np.arange(16),
        new_tokens=np.full(16, 4096),
        kv_tokens=np.full(16, 4096),
        is_decode=np.zeros(16, dtype=bool),
    )
    whole = rank_s(prefill)
    assert 0.5 * whole < sum(cm._tbo.parts_s(shape(prefill))) / 2 < 0.6 * whole


def test_eplb_lowers_the_busiest_expert_gpu() -> None:
    skew = ServingCostModel(V3, H800, dp(nodes=4, expert_zipf_exponent=0.8))
    eplb = ServingCostModel(
        V3, H800, dp(nodes=4, expert_zipf_exponent=0.8, eplb_redundant_experts=32)
    )
    batch = decode_batch(32, 1024, 2000)  # compute-bound experts: load, not weights, sets time
    assert (
        eplb.step_cost(batch).ops["moe_routed"].seconds
        < 0.7 * skew.step_cost(batch).ops["moe_routed"].seconds
    )


def test_dsa_attention_flat_past_topk_indexer_grows() -> None:
    cm = ServingCostModel(V32, H200, Deployment(name="d", attn_tp=1, moe_ep=8))
    steps = {L: cm.step_cost(decode_batch(8, 16, L)) for L in (8192, 32768, 131072)}
    attn = [steps[L].ops["attn_decode"].seconds for L in (8192, 32768, 131072)]
    idx = [steps[L].ops["dsa_indexer"].seconds for L in (8192, 32768, 131072)]
    assert attn[2] == pytest.approx(attn[0], rel=0.05)
    assert idx[0] < idx[1] < idx[2]
    assert idx[2] > 2 * idx[1]  # indexer scoring grows with L: long-context decode is not flat
    assert idx[2] / steps[131072].duration_s > idx[0] / steps[8192].duration_s  # share grows


def test_wrong_model_shape_profile_is_refused() -> None:
    # the published profile relabelled as if measured for a 256-wide latent
    shape = H800_PUB.model_shape.model_copy(update={"kv_lora_rank": 256})
    other = H800_PUB.model_copy(update={"model_shape": shape})
    with pytest.raises(ValueError, match="kv_lora_rank"):
        ServingCostModel(V3, H800, dp(), other)


def test_lm_head_only_for_prefill_chunks_that_finish_their_prompt() -> None:
    cm = ServingCostModel(V3, H800, dp(), H800_PUB)

    def chunk(samples: bool | None) -> BatchShape:
        flags = None if samples is None else np.array([samples])
        return BatchShape(
            num_ranks=16,
            rank=np.zeros(1, dtype=np.int64),
            new_tokens=np.array([4096]),
            kv_tokens=np.array([8192]),
            is_decode=np.array([False]),
            samples_token=flags,
        )

    assert cm.step_cost(chunk(False)).ops["lm_head"].seconds == 0.0  # a middle chunk: no logits
    last = cm.step_cost(chunk(True)).ops["lm_head"].seconds
    assert last > 0 and last == cm.step_cost(chunk(None)).ops["lm_head"].seconds


def test_extend_absorb_counts_work_as_its_table_does() -> None:
    """A short extend on the absorbed path is priced at its table's work convention over its
    one segment (BF16 W_UK/W_UV weights over d_k + d_v, a BF16 cache: the deployment's), so a
    measured point would come back exactly."""
    from sim.cost.attention_ops import op_at
    from tests.cost.pricer_spy import spied

    cm = ServingCostModel(V3, H800, dp(), H800_PUB)
    calls = spied(cm)
    batch = BatchShape(
        num_ranks=16,
        rank=np.zeros(1, dtype=np.int64),
        new_tokens=np.array([64]),
        kv_tokens=np.array([1088]),  # 1024 cached: SGLang's MLA path for extends
        is_decode=np.array([False]),
    )
    cm.step_cost(batch)
    ((_, attrs, flops, bytes_, _, _),) = [c for c in calls if c[0] == "mla_extend_absorb"]
    assert (flops, bytes_) == pytest.approx(op_at("mla_extend_absorb", attrs).work(V3.mla_spec, 2))


def test_gqa_and_kda_cores_use_the_attention_efficiency() -> None:
    """Attention cores outside the profile vocabulary are priced like MLA cores without a table:
    at the profile's attention efficiency, not its GEMM efficiency."""
    rl = load_profile("h200-roofline")
    r = rl.roofline
    slow = r.attention_compute_efficiency.model_copy(update={"value": 0.25})
    prof = rl.model_copy(
        update={"roofline": r.model_copy(update={"attention_compute_efficiency": slow})}
    )
    qwen = load_model("qwen3-235b-a22b")
    cm = ServingCostModel(qwen, H200, Deployment(name="tp4", attn_tp=4, moe_tp=8), prof)
    flops = 1e12  # compute-bound: the efficiency sets the time
    launch = r.launch_overhead_us.value * 1e-6
    peak = H200.peak_flops_per_s("bf16")
    from sim.cost.attention_ops import GqaDecode, GqaPrefill, Kda

    # each op's work 1e12 FLOPs (compute-bound: the efficiency sets the time)
    for op in (GqaPrefill(16, 1, 1e12 / 64, 1.0), GqaDecode(16, 1, 1e12 / 64, 1.0)):
        t = cm.pricer.price(op)
        assert op.work(None, 2)[0] == pytest.approx(flops)
        assert t.seconds == pytest.approx(flops / (peak * 0.25) + launch, rel=1e-9)
    kda = Kda(heads=1, batch=1, tokens=flops / 4, head_dim=1, state_bytes_per_elem=1)
    t = cm.pricer.price(kda)
    assert t.seconds == pytest.approx(flops / (peak * 0.25) + launch, rel=1e-9)


def test_a_repeated_step_shares_its_merged_ops_and_prices_them_as_anew() -> None:
    """A step whose critical rank's work and unit-wide ops repeat gets the same ops dict
    back (what lets the step log reuse its row), at the price a fresh model gives it."""
    cm = ServingCostModel(V3, H800, dp(), H800_PUB)
    first = cm.step_cost(decode_batch(16, 64, 2048))
    again = cm.step_cost(decode_batch(16, 64, 2048))
    fresh = ServingCostModel(V3, H800, dp(), H800_PUB).step_cost(decode_batch(16, 64, 2048))
    assert again.ops is first.ops
    assert again.duration_s == first.duration_s == fresh.duration_s
    assert again.ops == fresh.ops and list(again.ops) == list(fresh.ops)
    other = cm.step_cost(decode_batch(16, 32, 4096))
    assert other.ops is not first.ops
