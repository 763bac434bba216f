"""Deciding many ranks' batches at once gives each the paths it gets decided alone."""

from __future__ import annotations

import numpy as np
import pytest

from sim.catalog import load_model
from sim.cost.dispatch import (
    FIXED_DECODE,
    SGLANG_CHUNKED_PREFIX_CACHE_THRESHOLD,
    Segments,
    choose_paths,
    choose_paths_grouped,
    fixed_decode_path,
    policy_names,
)

V3 = load_model("deepseek-v3")


@pytest.mark.parametrize("policy", policy_names())
@pytest.mark.parametrize("sparse", [False, True])
def test_grouped_paths_equal_each_batch_decided_alone(policy: str, sparse: bool) -> None:
    rng = np.random.default_rng(11)
    seen: set[int] = set()
    for _ in range(40):
        n = int(rng.integers(1, 60))  # extend segments up to FEW_EXTENDS and beyond
        groups = rng.integers(0, 6, n)
        q = rng.integers(1, 6000, n)
        # prefixes: none, short, around SGLang's chunked-prefix threshold, long
        prefix = rng.choice([0, 0, 300, SGLANG_CHUNKED_PREFIX_CACHE_THRESHOLD, 90_000], n)
        dec = rng.random(n) < 0.4
        q[dec] = 2
        k = q + prefix + dec * rng.integers(1, 3000, n)
        seg = Segments(new_tokens=q, kv_tokens=k, is_decode=dec)
        got = choose_paths_grouped(policy, V3, seg, groups, sparse=sparse, heads=128)
        for g in np.unique(groups):
            sel = groups == g
            one = Segments(new_tokens=q[sel], kv_tokens=k[sel], is_decode=dec[sel])
            alone = choose_paths(policy, V3, one, sparse=sparse, heads=128)
            np.testing.assert_array_equal(got[sel], alone)
        seen |= set(got.tolist())
    assert len(seen) >= 2  # the draws reach more than one path


@pytest.mark.parametrize("policy", policy_names())
@pytest.mark.parametrize("sparse", [False, True])
def test_a_fixed_decode_path_is_the_path_of_every_decode_segment(policy: str, sparse: bool) -> None:
    """`fixed_decode_path` stands in for deciding a decode-only batch segment by segment: where
    a policy declares one, it must be what the policy gives every decode segment."""
    fixed = fixed_decode_path(policy, sparse)
    if fixed is None:
        assert policy not in FIXED_DECODE
        return
    rng = np.random.default_rng(5)
    for width in (1, 2, 4):  # decode, and MTP verify windows
        n = 500
        k = rng.integers(width, 200_000, n)
        seg = Segments(new_tokens=np.full(n, width), kv_tokens=k, is_decode=np.ones(n, bool))
        got = choose_paths(policy, V3, seg, sparse=sparse, heads=128)
        assert got.tolist() == [fixed] * n
