"""The activation reserve follows the largest prefill chunk and the decode graphs' batch."""

from __future__ import annotations

import pytest

from sim.catalog import load_gpu, load_model
from sim.cost.activations import activation_reserve_bytes, forward_activation_bytes
from sim.cost.memory import plan_memory
from sim.specs import Deployment

V3, H200 = load_model("deepseek-v3"), load_gpu("h200")


def test_an_ep_rank_reserves_its_chunks_expert_rows() -> None:
    """DP attention + EP, 8,192-token chunks: the routed experts' rows (8,192 x 8) dominate,
    each with FP8 input, BF16 gate_up, FP8 activation and BF16 output (31,744 B); plus the
    hidden state and residual (2 x 7,168 x 2 B per token)."""
    d = Deployment(name="ep8", attn_tp=1, chunked_prefill_tokens=8192, max_running_requests=256)
    per_row = 7168 + 2 * 2048 * 2 + 2048 + 7168 * 2
    chunk = 8192 * 8 * per_row + 8192 * 2 * 7168 * 2
    assert forward_activation_bytes(V3, d, 8192) == pytest.approx(chunk)
    graphs = 256 * 8 * per_row + 256 * 2 * 7168 * 2
    assert activation_reserve_bytes(V3, d) == pytest.approx(chunk + graphs)


def test_a_larger_chunk_reserves_more_and_an_explicit_value_wins() -> None:
    small = Deployment(name="s", attn_tp=1, chunked_prefill_tokens=4096)
    large = small.model_copy(update={"chunked_prefill_tokens": 16384})
    assert activation_reserve_bytes(V3, large) > 3 * activation_reserve_bytes(V3, small) / 2
    fixed = small.model_copy(update={"activation_reserve_gb": 4.0})
    assert activation_reserve_bytes(V3, fixed) == 4e9
    assert plan_memory(V3, H200, fixed).activation_reserve_bytes_per_gpu == 4e9
    a, b = (plan_memory(V3, H200, d) for d in (small, large))
    assert a.kv_capacity_tokens_per_gpu > b.kv_capacity_tokens_per_gpu
