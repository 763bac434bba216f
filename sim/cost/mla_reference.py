"""A tiny MLA layer (decoupled RoPE) computed both ways in float64, counting its FLOPs.

The expand and absorb computations are the same function of the inputs (seed 000); this module
is the executable statement of that, and its FLOP counter checks `sim.cost.mla`'s formulas on
real shapes. Pure numpy; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]


@dataclass(frozen=True)
class MlaWeights:
    """Per-head up-projections of the latent and the query's RoPE/no-RoPE parts."""

    w_uk: F64  # [H, d_c, d_k]   latent -> per-head no-RoPE key
    w_uv: F64  # [H, d_c, d_v]   latent -> per-head value

    @property
    def heads(self) -> int:
        return int(self.w_uk.shape[0])

    @staticmethod
    def random(rng: np.random.Generator, heads: int, d_c: int, d_k: int, d_v: int) -> MlaWeights:
        return MlaWeights(
            w_uk=rng.standard_normal((heads, d_c, d_k)) / np.sqrt(d_c),
            w_uv=rng.standard_normal((heads, d_c, d_v)) / np.sqrt(d_c),
        )


@dataclass
class FlopCounter:
    """FLOPs of the matmuls a forward ran (2 per multiply-add)."""

    flops: float = 0.0

    def einsum(self, spec: str, *ops: F64) -> F64:
        out = np.einsum(spec, *ops)
        inputs = spec.split("->")[0]
        sizes: dict[str, int] = {}
        for letters, arr in zip(inputs.split(","), ops, strict=True):
            sizes.update(zip(letters, arr.shape, strict=True))
        macs = float(np.prod([sizes[c] for c in set(inputs.replace(",", ""))]))
        self.flops += 2.0 * macs
        return out


def _causal_softmax(scores: F64, prefix: int) -> F64:
    q, k = scores.shape[-2:]
    allowed = np.arange(k)[None, :] <= (prefix + np.arange(q))[:, None]
    s = np.where(allowed, scores, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)  # type: ignore[no-any-return]


def expand_attention(
    w: MlaWeights, q_nope: F64, q_rope: F64, latent: F64, k_rope: F64, counter: FlopCounter
) -> F64:
    """Up-project every cached latent to per-head K and V, then ordinary causal attention.

    q_nope [H, q, d_k], q_rope [H, q, d_s], latent [k, d_c], k_rope [k, d_s] -> [H, q, d_v].
    """
    k_nope = counter.einsum("tc,hcd->htd", latent, w.w_uk)
    v = counter.einsum("tc,hcd->htd", latent, w.w_uv)
    scores = counter.einsum("hqd,htd->hqt", q_nope, k_nope) + counter.einsum(
        "hqd,td->hqt", q_rope, k_rope
    )
    scale = 1.0 / np.sqrt(q_nope.shape[-1] + q_rope.shape[-1])
    p = _causal_softmax(scores * scale, latent.shape[0] - q_nope.shape[1])
    return counter.einsum("hqt,htd->hqd", p, v)


def absorb_attention(
    w: MlaWeights, q_nope: F64, q_rope: F64, latent: F64, k_rope: F64, counter: FlopCounter
) -> F64:
    """Fold W_UK into the query, attend in latent space, apply W_UV to the latent output."""
    q_lat = counter.einsum("hqd,hcd->hqc", q_nope, w.w_uk)
    scores = counter.einsum("hqc,tc->hqt", q_lat, latent) + counter.einsum(
        "hqd,td->hqt", q_rope, k_rope
    )
    scale = 1.0 / np.sqrt(q_nope.shape[-1] + q_rope.shape[-1])
    p = _causal_softmax(scores * scale, latent.shape[0] - q_nope.shape[1])
    out_lat = counter.einsum("hqt,tc->hqc", p, latent)
    return counter.einsum("hqc,hcd->hqd", out_lat, w.w_uv)
