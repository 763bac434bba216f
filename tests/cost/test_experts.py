"""Expert popularity: Zipf shares capped at 1/k for top-k routing, and the busiest EP GPU."""

from __future__ import annotations

import numpy as np
import pytest

from sim.cost.experts import busiest_gpu_tokens, cap_shares, static_gpu_shares, zipf_popularity


def test_no_expert_gets_more_than_every_token() -> None:
    raw = zipf_popularity(256, 1.2)  # uncapped: the hottest expert takes a quarter of the pairs
    assert raw.max() > 0.2
    p = zipf_popularity(256, 1.2, experts_per_token=8)
    assert p.sum() == pytest.approx(1.0)
    assert p.max() == pytest.approx(1 / 8)  # every token picks it: 1 of its 8 pairs
    # the excess goes to the others in proportion: their order is kept
    order = np.argsort(-raw)
    assert np.all(np.diff(p[order]) <= 1e-15)


def test_cap_is_exact_and_leaves_feasible_shares_alone() -> None:
    even = np.full(8, 1 / 8)
    assert np.array_equal(cap_shares(even, 1 / 8), even)
    skewed = np.array([0.7, 0.2, 0.05, 0.05])
    capped = cap_shares(skewed, 0.4)
    assert capped == pytest.approx([0.4, 0.4, 0.1, 0.1])  # 0.2 overflows once the 0.3 is spread
    with pytest.raises(ValueError, match="cannot each stay at or below"):
        cap_shares(skewed, 0.2)


def test_capping_lowers_the_busiest_gpu_under_strong_skew() -> None:
    pairs = 4096 * 8
    uncapped = busiest_gpu_tokens(pairs, 256, 32, 1.2, 0)
    capped = busiest_gpu_tokens(pairs, 256, 32, 1.2, 0, experts_per_token=8)
    assert capped < uncapped
    assert busiest_gpu_tokens(pairs, 256, 32, 0.0, 0, 8) == busiest_gpu_tokens(
        pairs, 256, 32, 0.0, 0
    )


def test_default_skew_matches_the_production_tables_routing() -> None:
    """The default Zipf exponent gives DeepSeek-V3's busiest EP32 GPU (no EPLB) 3.30x the mean
    load: what aiconfigurator-core's default DeepSeek routing (power law 1.01) gives it at 16K
    tokens per GPU, and what its H200 MoE table's skewed-to-balanced latency shows (3.24x).
    Even routing stays one setting away."""
    from sim.specs import Deployment
    from sim.specs.deployment import DEFAULT_EXPERT_ZIPF_EXPONENT

    assert Deployment(name="d").expert_zipf_exponent == DEFAULT_EXPERT_ZIPF_EXPONENT
    shares = static_gpu_shares(256, 32, DEFAULT_EXPERT_ZIPF_EXPONENT, 0, 8)
    assert shares[0] * 32 == pytest.approx(3.30, abs=0.02)
    assert Deployment(name="even", expert_zipf_exponent=0).expert_zipf_exponent == 0.0
    assert static_gpu_shares(256, 32, 0.0, 0, 8)[0] * 32 == pytest.approx(1.0)


def test_eplb_leaves_the_measured_per_batch_drift(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under EPLB a GPU's per-batch load drifts around its static share by the relative spread
    TensorRT-LLM's offline-EPLB example measures for DeepSeek-R1 (EP36, 288 slots: 1,024 pairs
    per rank, standard deviation 53.98), less the batch's own binomial spread. Even routing and
    deployments without EPLB have no drift."""
    import math

    from sim.cost import experts
    from sim.specs.deployment import DEFAULT_EXPERT_ZIPF_EXPONENT as S

    derived = math.sqrt(53.976442**2 - 1024 * (1 - 1 / 36)) / 1024
    assert abs(experts.EPLB_LOAD_DRIFT - derived) < 1e-4
    pairs = 36 * 1024.0
    with_drift = busiest_gpu_tokens(pairs, 256, 36, S, 32, 8)
    even = busiest_gpu_tokens(pairs, 256, 36, 0.0, 32, 8)
    no_eplb = busiest_gpu_tokens(pairs, 256, 32, S, 0, 8)
    monkeypatch.setattr(experts, "EPLB_LOAD_DRIFT", 0.0)
    assert busiest_gpu_tokens(pairs, 256, 36, S, 32, 8) < with_drift
    assert busiest_gpu_tokens(pairs, 256, 36, 0.0, 32, 8) == even  # balanced: one setting away
    assert busiest_gpu_tokens(pairs, 256, 32, S, 0, 8) == no_eplb
    # the drift adds about sqrt(2 ln 36) = 2.68 drift deviations to the busiest GPU's 1,024
    assert with_drift / 1024 == pytest.approx(1.0 + 2.68 * math.hypot(0.0428, 1 / 32), abs=0.03)
