"""Absorb and expand are the same computation (float64), and the FLOP formulas count it."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cost import mla
from sim.cost.mla_reference import FlopCounter, MlaWeights, absorb_attention, expand_attention
from sim.specs.model import MlaSpec


def run_both(heads: int, d_c: int, d_k: int, d_s: int, d_v: int, q: int, prefix: int, seed: int):
    rng = np.random.default_rng(seed)
    w = MlaWeights.random(rng, heads, d_c, d_k, d_v)
    k = prefix + q
    latent, k_rope = rng.standard_normal((k, d_c)), rng.standard_normal((k, d_s))
    q_nope, q_rope = rng.standard_normal((heads, q, d_k)), rng.standard_normal((heads, q, d_s))
    ce, ca = FlopCounter(), FlopCounter()
    out_e = expand_attention(w, q_nope, q_rope, latent, k_rope, ce)
    out_a = absorb_attention(w, q_nope, q_rope, latent, k_rope, ca)
    return out_e, out_a, ce.flops, ca.flops


def test_small_layer_with_decoupled_rope_matches() -> None:
    out_e, out_a, _, _ = run_both(heads=4, d_c=16, d_k=8, d_s=4, d_v=8, q=6, prefix=0, seed=0)
    assert np.all(np.isfinite(out_e))
    np.testing.assert_allclose(out_a, out_e, rtol=1e-10, atol=1e-12)


def test_extend_after_prefix_matches() -> None:
    out_e, out_a, _, _ = run_both(heads=3, d_c=32, d_k=16, d_s=8, d_v=12, q=5, prefix=11, seed=1)
    np.testing.assert_allclose(out_a, out_e, rtol=1e-10, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    heads=st.integers(1, 6),
    d_c=st.integers(2, 40),
    d_k=st.integers(1, 16),
    d_s=st.integers(1, 8),
    d_v=st.integers(1, 16),
    q=st.integers(1, 7),
    prefix=st.integers(0, 9),
    seed=st.integers(0, 2**31),
)
def test_random_shapes_equal_outputs(heads, d_c, d_k, d_s, d_v, q, prefix, seed) -> None:
    out_e, out_a, _, _ = run_both(heads, d_c, d_k, d_s, d_v, q, prefix, seed)
    np.testing.assert_allclose(out_a, out_e, rtol=1e-9, atol=1e-10)


@settings(max_examples=25, deadline=None)
@given(heads=st.integers(1, 4), q=st.integers(1, 6), prefix=st.integers(0, 8))
def test_formulas_count_the_reference_flops(heads: int, q: int, prefix: int) -> None:
    # The reference computes full (non-causal-skipping) score matrices, i.e. q*k pairs;
    # the formulas with q*k pairs must match it exactly.
    d_c, d_k, d_s, d_v = 16, 8, 4, 8
    _, _, fe, fa = run_both(heads, d_c, d_k, d_s, d_v, q, prefix, seed=3)
    spec = MlaSpec(
        q_lora_rank=None,
        kv_lora_rank=d_c,
        qk_nope_head_dim=d_k,
        qk_rope_head_dim=d_s,
        v_head_dim=d_v,
    )
    k = q + prefix
    full = q * k
    assert fe == k * mla.projection_flops_per_token(spec, heads) + full * mla.expand_pair_flops(
        spec, heads
    )
    assert fa == mla.absorb_flops(spec, q, k, heads=heads, pairs=full)
