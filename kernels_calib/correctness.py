"""Check before timing: absorb and expand must give the same MLA output.

A small MLA layer with decoupled RoPE is built from fresh random tensors (never zeros). The
absorb path folds W_UK into the query, attends in latent space and applies W_UV last; the expand
path up-projects every cached latent to per-head K and V and runs ordinary attention. A kernel
under test replaces one side; the other side is the float32 reference. The relative error must
stay within the dtype's bound, and a NaN or Inf anywhere fails the check.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from kernels_calib import mla_torch

REL_ERROR_BOUND = {"fp32": 1e-4, "bf16": 3e-2, "fp8": 1.2e-1}


@dataclass(frozen=True)
class MlaCase:
    """One MLA layer's weights and inputs. Shapes: B batch, s new tokens, kv cached (s included)."""

    w_uk: torch.Tensor  # [H, d_k, d_c]: latent -> no-RoPE key, per head
    w_uv: torch.Tensor  # [H, d_c, d_v]: latent -> value, per head
    latent: torch.Tensor  # [B, kv, d_c]
    k_rope: torch.Tensor  # [B, kv, d_s], shared by all heads
    q_nope: torch.Tensor  # [B, s, H, d_k]
    q_rope: torch.Tensor  # [B, s, H, d_s]

    @property
    def scale(self) -> float:
        return 1.0 / math.sqrt(self.q_nope.shape[-1] + self.q_rope.shape[-1])

    def to(self, dtype: torch.dtype) -> MlaCase:
        return MlaCase(*(t.to(dtype) for t in vars(self).values()))


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    rel_error: float
    bound: float
    message: str


def random_case(
    *,
    batch: int,
    s_q: int,
    kv_len: int,
    heads: int,
    d_c: int,
    d_s: int,
    d_k: int,
    d_v: int,
    gen: torch.Generator,
    device: str,
) -> MlaCase:
    """Fresh float32 normal tensors, scaled so attention scores are O(1)."""

    def rnd(*shape: int, fan_in: int = 1) -> torch.Tensor:
        t = torch.randn(*shape, generator=gen, device=device, dtype=torch.float32)
        return t / math.sqrt(fan_in)

    return MlaCase(
        w_uk=rnd(heads, d_k, d_c, fan_in=d_c),
        w_uv=rnd(heads, d_c, d_v, fan_in=d_c),
        latent=rnd(batch, kv_len, d_c),
        k_rope=rnd(batch, kv_len, d_s),
        q_nope=rnd(batch, s_q, heads, d_k),
        q_rope=rnd(batch, s_q, heads, d_s),
    )


LatentCore = Callable[[torch.Tensor, torch.Tensor, int, float], torch.Tensor]


def absorb(case: MlaCase, core: LatentCore | None = None) -> torch.Tensor:
    """Absorb path output [B, s, H, d_v]; `core` is the latent attention kernel under test."""
    core = core or (lambda q, c, d_c, scale: mla_torch.latent_attention(q, c, d_c, scale))
    q_lat = torch.einsum("bshk,hkc->bshc", case.q_nope, case.w_uk)
    q = torch.cat([q_lat, case.q_rope], dim=-1)
    cache = torch.cat([case.latent, case.k_rope], dim=-1)
    o_lat = core(q, cache, case.latent.shape[-1], case.scale)
    return torch.einsum("bshc,hcv->bshv", o_lat, case.w_uv)


ExpandedCore = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float], torch.Tensor]


def expand(case: MlaCase, core: ExpandedCore | None = None) -> torch.Tensor:
    """Expand path output [B, s, H, d_v]; `core` is the expanded attention kernel under test."""
    core = core or mla_torch.expanded_attention
    heads = case.w_uk.shape[0]
    k_nope = torch.einsum("bnc,hkc->bhnk", case.latent, case.w_uk)
    rope = case.k_rope[:, None].expand(-1, heads, -1, -1)
    k = torch.cat([k_nope, rope], dim=-1)
    v = torch.einsum("bnc,hcv->bhnv", case.latent, case.w_uv)
    q = torch.cat([case.q_nope, case.q_rope], dim=-1).transpose(1, 2)
    return core(q, k, v, case.scale).transpose(1, 2)


def compare(got: torch.Tensor, want: torch.Tensor, bound: float, what: str) -> CheckResult:
    """Relative Frobenius error of `got` against `want`; NaN/Inf or a shape change fails."""
    if got.shape != want.shape:
        return CheckResult(
            False, math.inf, bound, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
        )
    if not bool(torch.isfinite(got).all()):
        return CheckResult(False, math.nan, bound, f"{what}: output holds NaN or Inf")
    g, w = got.double(), want.double()
    rel = float(torch.linalg.vector_norm(g - w) / torch.linalg.vector_norm(w).clamp_min(1e-30))
    ok = rel <= bound
    verdict = "ok" if ok else "FAILED"
    return CheckResult(
        ok, rel, bound, f"{what}: relative error {rel:.2e} (bound {bound:.0e}) {verdict}"
    )


def check_absorb_kernel(
    case: MlaCase, core: LatentCore, dtype: torch.dtype, bound: float, what: str
) -> CheckResult:
    """The absorb path with `core` at `dtype` against the float32 expand reference."""
    want = expand(case)
    got = absorb(case.to(dtype), core)
    return compare(got.float(), want, bound, what)


def check_expand_kernel(
    case: MlaCase, core: ExpandedCore, dtype: torch.dtype, bound: float, what: str
) -> CheckResult:
    """The expand path with `core` at `dtype` against the float32 absorb reference."""
    want = absorb(case)
    got = expand(case.to(dtype), core)
    return compare(got.float(), want, bound, what)
