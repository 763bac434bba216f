"""Dense MLP layers split over the unit (SGLang's default under DP attention) against each
rank's own copy."""

from __future__ import annotations

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.batch import BatchShape
from sim.cost.memo import round_to_bucket
from sim.cost.memory import WEIGHT_BYTES, layer_params, plan_memory
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment

V3, H200 = load_model("deepseek-v3"), load_gpu("h200")
H200_RL = load_profile("h200-roofline")


def decode_step(per_rank: list[int]) -> BatchShape:
    rank = np.repeat(np.arange(len(per_rank)), per_rank)
    return BatchShape(
        num_ranks=len(per_rank),
        rank=rank,
        new_tokens=np.ones(rank.size, dtype=np.int64),
        kv_tokens=np.full(rank.size, 2000),
        is_decode=np.ones(rank.size, dtype=bool),
    )


def prefill_beside_decode() -> BatchShape:
    """8 ranks of 10 decode requests each, and rank 0 also prefilling a 4,096-token prompt."""
    b = decode_step([10] * 8)
    return BatchShape(
        num_ranks=8,
        rank=np.append(b.rank, 0),
        new_tokens=np.append(b.new_tokens, 4096),
        kv_tokens=np.append(b.kv_tokens, 4096),
        is_decode=np.append(b.is_decode, False),
    )


def model(dense: str, attn_tp: int = 1) -> ServingCostModel:
    d = Deployment(name=dense, attn_tp=attn_tp, dense_ffn=dense)  # type: ignore[arg-type]
    return ServingCostModel(V3, H200, d, H200_RL)


def test_unit_dense_frees_seven_eighths_of_the_dense_weights() -> None:
    own = plan_memory(V3, H200, model("tp").deployment)
    unit = plan_memory(V3, H200, model("unit").deployment)
    dense = V3.moe.first_dense_layers * layer_params(V3).dense_mlp * WEIGHT_BYTES["fp8"]
    saved = own.weights_bytes_per_gpu - unit.weights_bytes_per_gpu
    assert saved == pytest.approx(dense * 7 / 8)
    assert 0.9e9 < saved < 1.2e9  # about 1 GB per GPU for DeepSeek-V3's three dense layers
    assert unit.kv_capacity_tokens_per_gpu > own.kv_capacity_tokens_per_gpu


@pytest.mark.parametrize(
    ("per_rank", "moved"),
    [
        # even ranks: every rank padded to 64 rows, all-gathered in and reduce-scattered out;
        # each GPU receives the other 7 ranks' parts each way
        ([64] * 8, 2 * 7 * 64),
        # one busy rank: padding would move 8 x 64 rows, the ranks' 134 rows back to back in
        # two ring all-reduces move fewer (SGLang's sum-len buffer); the unit's rows are
        # priced at their 2^(1/16) bucket (`CommLoad.rounded`)
        ([64] + [10] * 7, 2 * 2 * 7 / 8 * round_to_bucket(134)),
    ],
)
def test_unit_dense_gathers_the_cheaper_buffer_over_nvlink(
    per_rank: list[int], moved: float
) -> None:
    """DP8 in one node, decode: the gather and scatter of each of the 3 dense layers."""
    step = model("unit").step_cost(decode_step(per_rank))
    r = H200_RL.roofline
    link = H200.nvlink_gb_s * 1e9 * r.comm_link_efficiency.value
    nbytes = moved * V3.hidden_size * 2.0
    launch = r.launch_overhead_us.value * 1e-6
    assert step.ops["dense_gather"].seconds == pytest.approx(3 * (nbytes / link + launch))
    assert step.ops["dense_gather"].source == "roofline"
    own = model("tp").step_cost(decode_step(per_rank))
    assert "dense_gather" not in own.ops
    # all rows against an eighth of the weights: at decode sizes the GEMMs read weights, so
    # the unit's slice is cheaper than a rank's whole copy for its own rows
    assert step.ops["dense_mlp"].seconds < own.ops["dense_mlp"].seconds


def test_unit_dense_sums_prefill_rows_without_padding() -> None:
    """A step with a prefill chunk always lays the ranks' rows back to back (sum-len): one rank
    prefilling 4096 tokens beside its and 7 other ranks' 10 decode requests gathers 4096 + 80
    rows, not 8 x 4106."""
    b = prefill_beside_decode()
    step = model("unit").step_cost(b)
    gather = step.ops["dense_gather"]
    r = H200_RL.roofline
    link = H200.nvlink_gb_s * 1e9 * r.comm_link_efficiency.value
    nbytes = 2 * 2 * 7 / 8 * round_to_bucket(4096 + 80) * V3.hidden_size * 2.0
    assert gather.seconds == pytest.approx(3 * (nbytes / link + r.launch_overhead_us.value * 1e-6))


def test_unit_dense_is_tp_when_attention_spans_the_unit() -> None:
    """TP8 attention: the unit is one rank, so there is nothing to gather and the dense MLP is
    sharded eight ways either way."""
    step = decode_step([32])
    unit, tp = model("unit", attn_tp=8).step_cost(step), model("tp", attn_tp=8).step_cost(step)
    assert unit.ops["dense_gather"].seconds == 0
    assert unit.duration_s == pytest.approx(tp.duration_s)
    assert unit.ops["dense_mlp"].seconds == pytest.approx(tp.ops["dense_mlp"].seconds)


def test_tp_experts_gather_the_same_way() -> None:
    """DP attention feeding TP8 experts gathers before every MoE layer as the dense layers do:
    a prefill step lays the ranks' rows back to back (two all-reduces of 4,096 + 80 rows)."""
    d = Deployment(name="dp_tp", attn_tp=1, moe_tp=8)
    cm = ServingCostModel(V3, H200, d, H200_RL)
    b = prefill_beside_decode()
    r = H200_RL.roofline
    link = H200.nvlink_gb_s * 1e9 * r.comm_link_efficiency.value
    nbytes = 2 * 2 * 7 / 8 * round_to_bucket(4096 + 80) * V3.hidden_size * 2.0
    per_layer = nbytes / link + r.launch_overhead_us.value * 1e-6
    assert cm.step_cost(b).ops["dp_gather"].seconds == pytest.approx(V3.moe_layers * per_layer)
