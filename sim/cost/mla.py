"""MLA per-layer FLOPs and HBM bytes of the two equivalent computations (seed 000, seed 002).

Notation: H heads, d_c latent (kv_lora_rank), d_s shared RoPE key, d_k no-RoPE q/k per head,
d_v value per head. A forward over `q` new tokens whose cache holds `k` tokens in total (new ones
included) has causal pairs P = q*k - q*(q-1)/2.

- expand (MHA path): up-project every cached latent to per-head K, V, then plain attention:
  k * 2H d_c (d_k + d_v)  +  P * (2H (d_k + d_s) + 2H d_v)
- absorb (MLA path): fold W_UK into the query, attend in latent space, apply W_UV last:
  q * 2H d_c (d_k + d_v)  +  P * (2H (d_c + d_s) + 2H d_c)

`rope=False` drops the d_s part (seed 002 leaves it out). All functions broadcast over numpy
arrays of q and k.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from sim.specs.model import MlaSpec

Num = float | NDArray[np.float64]


def causal_pairs(q: ArrayLike, k: ArrayLike) -> Num:
    """(query, key) pairs when q new tokens attend causally to a cache of k tokens (q included,
    so at most k of them: a larger q, e.g. one axis of a table point moved alone, counts k)."""
    ka = np.asarray(k, dtype=np.float64)
    qa = np.minimum(np.asarray(q, dtype=np.float64), ka)
    return qa * ka - qa * (qa - 1.0) / 2.0  # type: ignore[no-any-return]


def sparse_pairs(q: ArrayLike, k: ArrayLike, topk: int) -> Num:
    """Ideal pairs when each new token attends to at most `topk` of its causal context (DSA).

    New token i (0-based) sees k - q + 1 + i tokens; it keeps min(that, topk). This is the seeds'
    min(L, k) work, the least any kernel must do; the sparse kernels visit `sparse_slots`, which
    is what the cost model prices and what the dispatch policies compare.
    """
    qa, ka = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    lo, hi = ka - qa + 1.0, ka  # context sizes of the first and last new token
    mid = np.clip(hi, None, topk)  # contexts up to topk count in full ...
    full = np.where(mid >= lo, (lo + mid) * (mid - lo + 1.0) / 2.0, 0.0)
    capped = np.maximum(0.0, hi - np.maximum(lo - 1.0, topk)) * topk  # ... the rest count topk
    return full + capped  # type: ignore[no-any-return]


def sparse_slots(q: ArrayLike, topk: int) -> Num:
    """Index slots DSA's sparse attention kernel visits: all `topk` for every new token, whatever
    its context (FlashMLA's published sparse latencies are flat below kv_len = topk: the kernel
    visits every slot of the top-k index, valid or not)."""
    return np.asarray(q, dtype=np.float64) * float(topk)  # type: ignore[no-any-return]


def projection_flops_per_token(m: MlaSpec, heads: int) -> float:
    """W_UK and W_UV applied once: per cached token (expand) or per new token (absorb)."""
    return 2.0 * heads * m.kv_lora_rank * (m.qk_nope_head_dim + m.v_head_dim)


def expand_pair_flops(m: MlaSpec, heads: int, rope: bool = True) -> float:
    ds = m.qk_rope_head_dim if rope else 0
    return 2.0 * heads * (m.qk_nope_head_dim + ds) + 2.0 * heads * m.v_head_dim


def absorb_pair_flops(m: MlaSpec, heads: int, rope: bool = True) -> float:
    ds = m.qk_rope_head_dim if rope else 0
    return 2.0 * heads * (m.kv_lora_rank + ds) + 2.0 * heads * m.kv_lora_rank


def expand_flops(m: MlaSpec, q: ArrayLike, k: ArrayLike, *, heads: int, rope: bool = True) -> Num:
    """Expand path: kv_b up-projection of all k cached tokens plus attention over P pairs."""
    ka = np.asarray(k, dtype=np.float64)
    pairs = causal_pairs(q, k)
    return ka * projection_flops_per_token(m, heads) + pairs * expand_pair_flops(m, heads, rope)  # type: ignore[no-any-return]


def absorb_flops(
    m: MlaSpec,
    q: ArrayLike,
    k: ArrayLike,
    *,
    heads: int,
    rope: bool = True,
    pairs: ArrayLike | None = None,
) -> Num:
    """Absorb path: W_UK/W_UV per new token plus latent-space attention over P pairs.

    `pairs` overrides the causal pair count (sparse attention passes its own).
    """
    qa = np.asarray(q, dtype=np.float64)
    p = causal_pairs(q, k) if pairs is None else np.asarray(pairs, dtype=np.float64)
    return qa * projection_flops_per_token(m, heads) + p * absorb_pair_flops(m, heads, rope)  # type: ignore[no-any-return]


def absorb_bytes(m: MlaSpec, k: ArrayLike, *, kv_bytes_per_token: float, rope: bool = True) -> Num:
    """HBM bytes of absorbed attention: the latent cache read once (fused kernel)."""
    ka = np.asarray(k, dtype=np.float64)
    if not rope:  # seed 002 counts only the latent
        kv_bytes_per_token *= m.kv_lora_rank / (m.kv_lora_rank + m.qk_rope_head_dim)
    return ka * kv_bytes_per_token  # type: ignore[no-any-return]


def expand_bytes(
    m: MlaSpec,
    k: ArrayLike,
    *,
    heads: int,
    kv_bytes_per_token: float,
    rope: bool = True,
    act_bytes: int = 2,
) -> Num:
    """Expand path bytes: read the latent cache, then the per-head K and V it materialises."""
    ka = np.asarray(k, dtype=np.float64)
    ds = m.qk_rope_head_dim if rope else 0
    per_head = m.qk_nope_head_dim + ds + m.v_head_dim
    return absorb_bytes(m, k, kv_bytes_per_token=kv_bytes_per_token, rope=rope) + (
        ka * heads * per_head * act_bytes
    )  # type: ignore[no-any-return]


def crossover_q(m: MlaSpec, k: ArrayLike) -> Num:
    """New-token count q* above which expand is cheaper, for a cache of k tokens.

    q* = a k / (a + (c - e) k) with a = d_c (d_k + d_v), c - e = 2 d_c - d_k - d_v (the RoPE part
    cancels); independent of the head count. Tends to a / (c - e) (~171) for long caches.
    """
    ka = np.asarray(k, dtype=np.float64)
    a = m.kv_lora_rank * (m.qk_nope_head_dim + m.v_head_dim)
    c_minus_e = 2 * m.kv_lora_rank - m.qk_nope_head_dim - m.v_head_dim
    return a * ka / (a + c_minus_e * ka)  # type: ignore[no-any-return]
