"""The MTP module's work: one attention layer and one MoE layer per pass, over the decode
requests for each draft token and over prompt chunks to fill its own KV."""

from __future__ import annotations

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.cost.batch import BatchShape
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment
from tests.cost.pricer_spy import Call, spied

V3, H200 = load_model("deepseek-v3"), load_gpu("h200")
MTP = {"mtp_draft_tokens": 1, "mtp_acceptance": (0.8,)}


def _gemms(priced: list[Call]) -> list[tuple[int, int, float]]:
    """(k, n, m) of each GEMM priced."""
    return [(int(a["k"]), int(a["n"]), float(a["m"])) for op, a, *_ in priced if op == "gemm"]  # type: ignore[call-overload]


def ep16(**kw: object) -> Deployment:
    return Deployment(name="ep16", nodes=2, attn_tp=1, **kw)  # type: ignore[arg-type]


def test_a_draft_pass_runs_no_dense_mlp() -> None:
    """DeepSeek's MTP module is a MoE layer: a draft pass runs its gate and shared expert (its
    routed experts are unit-wide), never the 18432-wide dense MLP of the first layers."""
    cm = ServingCostModel(V3, H200, ep16(**MTP))
    priced = spied(cm)
    # per rank, verify width 2: the target runs 16 tokens, and so does the draft extend (the
    # accepted tokens + 1, padded to 2)
    requests = 8
    batch = BatchShape(
        num_ranks=16,
        rank=np.repeat(np.arange(16), requests),
        new_tokens=np.full(16 * requests, 2),
        kv_tokens=np.full(16 * requests, 4096),
        is_decode=np.ones(16 * requests, dtype=bool),
    )
    cm.step_cost(batch)
    calls = _gemms(priced)
    dense = V3.moe.dense_intermediate_size
    assert {m for k, n, m in calls if (k, n) == (dense, V3.hidden_size)} == {2 * requests}
    shared = V3.moe.n_shared_experts * V3.moe.moe_intermediate_size
    shared_m = {m for k, n, m in calls if (k, n) == (shared, V3.hidden_size)}
    assert shared_m == {2 * requests}


def test_the_draft_extend_runs_over_the_verify_width() -> None:
    """SGLang's draft extend after verify runs the MTP module over each request's accepted
    tokens + 1, padded to drafts + 1; the other drafts - 1 tokens take single-token passes.
    Two drafts, 8 requests per rank: the module's shared expert runs at m = 24, then 8."""
    d2 = {"mtp_draft_tokens": 2, "mtp_acceptance": (0.8, 0.6)}
    cm = ServingCostModel(V3, H200, ep16(**d2))
    priced = spied(cm)
    requests = 8
    batch = BatchShape(
        num_ranks=16,
        rank=np.repeat(np.arange(16), requests),
        new_tokens=np.full(16 * requests, 3),
        kv_tokens=np.full(16 * requests, 4096),
        is_decode=np.ones(16 * requests, dtype=bool),
    )
    step = cm.step_cost(batch)
    calls = _gemms(priced)
    shared = V3.moe.n_shared_experts * V3.moe.moe_intermediate_size
    shared_m = sorted(m for k, n, m in calls if (k, n) == (shared, V3.hidden_size))
    assert shared_m == [requests, 3 * requests, 3 * requests]  # draft pass, extend, target
    # the module's routed experts follow: one pass over 3 tokens per request, one over 1
    from sim.cost.memo import round_to_bucket
    from sim.cost.routed import routed_gemms
    from sim.cost.routed_elementwise import routed_elementwise

    def routed(tokens: float) -> float:
        act = routed_elementwise(cm.pricer, V3, cm.deployment, tokens, True)
        return routed_gemms(cm.pricer, V3, cm.deployment, tokens, True).seconds + act.seconds

    unit = 16.0 * requests
    expected = routed(round_to_bucket(3 * unit)) + routed(round_to_bucket(unit))  # rounded loads
    assert step.ops["mtp_draft_moe"].seconds == pytest.approx(expected, rel=1e-9)
    from sim.cost.unit_work import draft_passes

    assert draft_passes(1) == [(2, 1)] and draft_passes(3) == [(4, 1), (1, 2)]


def prefill(samples: bool) -> BatchShape:
    return BatchShape(
        num_ranks=16,
        rank=np.arange(16),
        new_tokens=np.full(16, 2048),
        kv_tokens=np.full(16, 2048),
        is_decode=np.zeros(16, dtype=bool),
        samples_token=np.full(16, samples),
    )


def test_the_mtp_module_runs_over_prompt_chunks() -> None:
    """With MTP, a prompt chunk also runs the MTP module to fill its KV: about one more layer
    of the target (plus its eh_proj), on the rank and in the unit-wide experts and exchange."""
    with_mtp = ServingCostModel(V3, H200, ep16(**MTP)).step_cost(prefill(False))
    without = ServingCostModel(V3, H200, ep16()).step_cost(prefill(False))
    assert "mtp_prefill" not in without.ops
    for op in ("mtp_prefill", "mtp_prefill_moe", "mtp_prefill_comm"):
        assert with_mtp.ops[op].seconds > 0
    one_layer = without.duration_s / V3.num_layers
    extra = with_mtp.duration_s - without.duration_s
    assert 0.8 * one_layer < extra < 2 * one_layer
    # its head runs only for chunks that finish their prompt (the first draft token)
    last = ServingCostModel(V3, H200, ep16(**MTP)).step_cost(prefill(True))
    head = 2.0 * V3.hidden_size * V3.vocab_size / H200.hbm_bytes_per_s  # BF16, one row each
    gain = last.ops["mtp_prefill"].seconds - with_mtp.ops["mtp_prefill"].seconds
    assert gain == pytest.approx(head, rel=0.05)
