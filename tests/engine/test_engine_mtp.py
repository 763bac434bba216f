"""MTP: accepted drafts follow the leading-run rule; the mean matches the closed form."""

from __future__ import annotations

import numpy as np
import pytest

from sim.engine.mtp import DraftSampler, DrawStream, expected_accept_len
from sim.metrics import summarize
from sim.specs import Slo
from tests.builders import unit
from tests.engine.fixed_cost import FixedCost, requests, run_trace


def test_closed_form() -> None:
    assert expected_accept_len(()) == 1.0
    assert expected_accept_len((0.9, 0.8, 0.7)) == pytest.approx(1 + 0.9 + 0.72 + 0.504)


@pytest.mark.parametrize("probs", [(0.85,), (0.9, 0.8, 0.7), (1.0, 0.0, 1.0), (0.6, 0.6)])
def test_sampled_mean_matches_closed_form(probs: tuple[float, ...]) -> None:
    s = DraftSampler(probs, np.random.default_rng(7))
    acc = s.accepted(400_000)
    assert acc.min() >= 0 and acc.max() <= len(probs)
    assert float(acc.mean()) + 1 == pytest.approx(expected_accept_len(probs), abs=5e-3)


def test_a_draft_counts_only_after_all_before_it() -> None:
    # position 2 always rejected: position 3 can never count even though p3 = 1
    acc = DraftSampler((1.0, 0.0, 1.0), np.random.default_rng(0)).accepted(1000)
    assert set(acc.tolist()) == {1}


def test_engine_reports_mean_acceptance_and_caps_output() -> None:
    probs = (0.9, 0.8, 0.7)
    cost = FixedCost(step_s=0.010)
    dep = unit(role="decode", mtp_draft_tokens=3, mtp_acceptance=probs)
    out = run_trace(dep, cost, requests(*[(0.0, 100, 2000)] * 64))
    assert (out.table.generated[:64] == 2000).all()  # never more than asked for
    res = summarize(out.record, Slo(ttft_s=1.0, tpot_s=1.0))
    assert res.mtp_accept_len == pytest.approx(expected_accept_len(probs), abs=0.01)
    # every decode segment verifies 1 + 3 tokens with its KV grown by the drafts
    assert res.tpot_s.mean == pytest.approx(0.010 / res.mtp_accept_len, rel=0.02)


def _reference(rng: np.random.Generator, probs: tuple[float, ...], n: int) -> np.ndarray:
    """Accepted drafts as float32 uniforms from `rng` give them (the definition)."""
    p = np.asarray(probs, dtype=np.float32)
    if len(probs) == 1:
        return (rng.random(n, dtype=np.float32) < p[0]).astype(np.int8)
    ok = rng.random((n, len(probs)), dtype=np.float32) < p
    return np.where(ok.all(axis=1), len(probs), np.argmin(ok, axis=1)).astype(np.int8)


@pytest.mark.parametrize("held", [False, True])
def test_draw_stream_matches_float32_uniforms_draw_for_draw(held: bool) -> None:
    # two samplers (one and three drafts, as two PD pools) share one stream; any split of calls,
    # odd sizes, a half-draw already held by the generator, and blocks smaller than a call
    rng, ref = np.random.default_rng(11), np.random.default_rng(11)
    if held:
        rng.random(1, dtype=np.float32), ref.random(1, dtype=np.float32)
    stream = DrawStream(rng, block=64)
    kinds = [(0.8,), (0.9, 0.8, 0.7), (1.0,), (0.0,), (0.123456789,), (1.0, 0.0, 1.0)]
    samplers = [DraftSampler(p, stream) for p in kinds]
    sizes = np.random.default_rng(3).integers(0, 150, 300).tolist()
    for k, n in enumerate(sizes):
        probs = kinds[k % len(kinds)]
        got = samplers[k % len(kinds)].accepted(n)
        assert np.array_equal(got, _reference(ref, probs, n)), (k, n, probs)


def test_sampler_without_pcg64_draws_float32_uniforms() -> None:
    s = DraftSampler((0.7,), np.random.Generator(np.random.MT19937(5)))
    assert s.draws is None
    got = s.accepted(1000)
    assert np.array_equal(got, _reference(np.random.Generator(np.random.MT19937(5)), (0.7,), 1000))
