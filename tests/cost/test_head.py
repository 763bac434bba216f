"""The output head split over the unit (SGLang's default placement) against each rank's own."""

from __future__ import annotations

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.batch import BatchShape
from sim.cost.head import sampled_rows
from sim.cost.memory import plan_memory
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment

V3, H800 = load_model("deepseek-v3"), load_gpu("h800")
H800_RL = load_profile("h800-roofline")


def decode_step(ranks: int, per_rank: int) -> BatchShape:
    rank = np.repeat(np.arange(ranks), per_rank)
    return BatchShape(
        num_ranks=ranks,
        rank=rank,
        new_tokens=np.ones(rank.size, dtype=np.int64),
        kv_tokens=np.full(rank.size, 2000),
        is_decode=np.ones(rank.size, dtype=bool),
    )


def model(head: str, nodes: int = 2) -> ServingCostModel:
    d = Deployment(name=head, nodes=nodes, attn_tp=1, lm_head=head)  # type: ignore[arg-type]
    return ServingCostModel(V3, H800, d, H800_RL)


def test_sampled_rows_count_verify_tokens_and_completed_prompts() -> None:
    b = BatchShape(
        num_ranks=2,
        rank=np.array([0, 0, 1, 1]),
        new_tokens=np.array([2, 2, 512, 300]),
        kv_tokens=np.array([100, 200, 512, 900]),
        is_decode=np.array([True, True, False, False]),
        samples_token=np.array([True, True, False, True]),
    )
    assert sampled_rows(b) == 2 + 2 + 1  # two verify widths of 2, one prompt completes


def test_unit_head_frees_memory_on_every_gpu() -> None:
    rank = plan_memory(V3, H800, model("rank").deployment)
    unit = plan_memory(V3, H800, model("unit").deployment)
    table = V3.vocab_size * V3.hidden_size * 2.0  # BF16 head
    saved = rank.weights_bytes_per_gpu - unit.weights_bytes_per_gpu
    assert saved == pytest.approx(table * (1 - 1 / 16))
    assert unit.kv_capacity_tokens_per_gpu > rank.kv_capacity_tokens_per_gpu


def test_unit_head_gathers_the_logits_over_the_unit() -> None:
    """EP16 over two nodes: the gathers cross RDMA; the hidden states arrive by a ring
    all-reduce of the ranks' rows back to back (2 x 15/16 of them, BF16), the logits by an
    all-gather (15/16 of the full vocabulary's, BF16)."""
    step = model("unit").step_cost(decode_step(16, 128))
    rows = 16 * 128
    nbytes = rows * (2 * V3.hidden_size + V3.vocab_size) * 2.0 * 15 / 16
    r = H800_RL.roofline
    link = H800.nic_gb_s * 1e9 * r.comm_link_efficiency.value
    launches = 2 * r.launch_overhead_us.value * 1e-6
    assert step.ops["logits_gather"].seconds == pytest.approx(nbytes / link + launches)
    # the rank head reads the whole vocabulary's weights for its own rows, the unit head a
    # sixteenth for all rows: cheaper here, but the gather costs far more across nodes
    own = model("rank").step_cost(decode_step(16, 128))
    assert step.ops["lm_head"].seconds < own.ops["lm_head"].seconds
    assert step.duration_s > own.duration_s
