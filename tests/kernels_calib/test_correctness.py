"""Absorb and expand must agree; a wrong weight or a NaN never passes."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from kernels_calib import correctness, mla_torch

DIMS = {"heads": 4, "d_c": 64, "d_s": 16, "d_k": 32, "d_v": 32}


def case(s_q: int = 3, kv: int = 40) -> correctness.MlaCase:
    gen = torch.Generator().manual_seed(0)
    return correctness.random_case(batch=2, s_q=s_q, kv_len=kv, gen=gen, device="cpu", **DIMS)


def test_absorb_equals_expand_in_float32_and_bf16() -> None:
    c = case()
    assert correctness.compare(correctness.absorb(c), correctness.expand(c), 1e-5, "fp32").ok
    core = lambda q, cache, d_c, scale: mla_torch.latent_attention(q, cache, d_c, scale)  # noqa: E731
    result = correctness.check_absorb_kernel(c, core, torch.bfloat16, 3e-2, "bf16")
    assert result.ok and 0 < result.rel_error < 3e-2


def test_inputs_are_random_not_zero() -> None:
    c = case()
    for t in vars(c).values():
        assert bool((t != 0).all()) and float(t.std()) > 0


def test_wrong_w_uv_is_caught() -> None:
    c = case()
    wrong = dataclasses.replace(c, w_uv=c.w_uv * 1.2)
    result = correctness.compare(correctness.absorb(wrong), correctness.expand(c), 3e-2, "absorb")
    assert not result.ok and "FAILED" in result.message
    swapped = dataclasses.replace(c, w_uv=c.w_uv.flip(0))  # heads' value matrices mixed up
    assert not correctness.compare(correctness.absorb(swapped), correctness.expand(c), 3e-2, "x").ok


def test_nan_never_passes() -> None:
    c = case()
    out = correctness.expand(c)
    bad = out.clone()
    bad[0, 0, 0, 0] = float("nan")
    result = correctness.compare(bad, out, 1e9, "nan")
    assert not result.ok and "NaN" in result.message


def test_chunked_prefix_with_lse_merge_equals_one_shot() -> None:
    c = case(s_q=8, kv=100)
    core = lambda q, k, v, s: mla_torch.chunked_prefix_attention(q, k, v, s, chunk=16)  # noqa: E731
    assert correctness.check_expand_kernel(c, core, torch.float32, 1e-5, "chunked").ok


def test_score_slicing_does_not_change_results(monkeypatch: pytest.MonkeyPatch) -> None:
    c = case(s_q=5, kv=60)
    whole = correctness.absorb(c)
    monkeypatch.setattr(mla_torch, "SCORE_BUDGET_BYTES", 4096)  # one query row per slice
    sliced = correctness.absorb(c)
    assert torch.allclose(whole, sliced, rtol=1e-5, atol=1e-6)
