"""Plain-torch MLA kernels: the fallbacks timed when no kernel library is importable.

Layouts: latent caches are [batch, tokens, d_c + d_s] (latent first, RoPE part last); absorbed
queries [batch, s_q, heads, d_c + d_s]; expanded attention uses SDPA's [batch, heads, len, dim].
Causal masks are bottom-right aligned: new token i of s_q sees the cache up to kv - s_q + i.
Large score matrices are processed in slices so no intermediate exceeds `SCORE_BUDGET_BYTES`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

SCORE_BUDGET_BYTES = 1 << 30


def causal_bias(s_q: int, kv: int, device: torch.device) -> torch.Tensor:
    """[s_q, kv] additive mask: 0 where new token i may look, -inf after kv - s_q + i."""
    rows = torch.arange(s_q, device=device)[:, None]
    cols = torch.arange(kv, device=device)[None, :]
    return torch.zeros(s_q, kv, device=device).masked_fill(cols > kv - s_q + rows, -math.inf)


def latent_attention(
    q: torch.Tensor, cache: torch.Tensor, d_c: int, scale: float, causal: bool = True
) -> torch.Tensor:
    """Absorbed attention core: [B, s, H, d_c+d_s] x [B, kv, d_c+d_s] -> [B, s, H, d_c].

    Scores are q . cache over the full width; values are the latent part of the cache.
    """
    b, s, h, width = q.shape
    kv = cache.shape[1]
    rows = max(1, SCORE_BUDGET_BYTES // (6 * h * kv))  # bf16 scores + fp32 softmax per row
    out = torch.empty(b, s, h, d_c, dtype=q.dtype, device=q.device)
    bias = causal_bias(s, kv, q.device) if causal and s > 1 else None
    s_step = max(1, min(s, rows))
    b_step = max(1, rows // s) if s_step == s else 1
    for b0 in range(0, b, b_step):
        c = cache[b0 : b0 + b_step]
        for s0 in range(0, s, s_step):
            qs = q[b0 : b0 + b_step, s0 : s0 + s_step]
            n = qs.shape[1]
            scores = torch.bmm(qs.reshape(qs.shape[0], n * h, width), c.transpose(1, 2))
            scores = scores.float().mul_(scale).view(qs.shape[0], n, h, kv)
            if bias is not None:
                scores += bias[s0 : s0 + n, None, :]
            probs = torch.softmax(scores, dim=-1).to(q.dtype).view(qs.shape[0], n * h, kv)
            o = torch.bmm(probs, c[..., :d_c])
            out[b0 : b0 + b_step, s0 : s0 + n] = o.view(qs.shape[0], n, h, d_c)
    return out


def expanded_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float
) -> torch.Tensor:
    """Causal (bottom-right) attention [B, H, s, dqk] x [B, H, kv, dqk], [B, H, kv, dv]."""
    s, kv = q.shape[2], k.shape[2]
    if s == kv:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(s, kv), scale=scale)


def expanded_attention_vpad(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float
) -> torch.Tensor:
    """`expanded_attention` with V zero-padded to the q/k width and the output cut back: the
    flash backends want one head width, and serving engines pad V the same way (the copy is
    part of the cost timed)."""
    pad = q.shape[-1] - v.shape[-1]
    return expanded_attention(q, k, F.pad(v, (0, pad)), scale)[..., : v.shape[-1]]


def attention_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention output [B, H, s, dv] and its log-sum-exp [B, H, s] (fp32), in query slices."""
    b, h, s, _ = q.shape
    kv = k.shape[2]
    rows = max(1, SCORE_BUDGET_BYTES // (4 * b * h * kv))
    outs, lses = [], []
    bias = causal_bias(s, kv, q.device) if causal else None
    for s0 in range(0, s, rows):
        scores = torch.matmul(q[:, :, s0 : s0 + rows], k.transpose(-1, -2)).float() * scale
        if bias is not None:
            scores += bias[s0 : s0 + rows]
        lse = torch.logsumexp(scores, dim=-1)
        probs = torch.exp(scores - lse[..., None]).to(v.dtype)
        outs.append(torch.matmul(probs, v))
        lses.append(lse)
    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)


def attention_lse_fused(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """`attention_lse` through torch's fused memory-efficient kernel (CUDA only).

    Causal here is top-left aligned, which is only right for square blocks (the chunked path
    uses it for the new tokens' own block).
    """
    out, lse, _, _ = torch.ops.aten._scaled_dot_product_efficient_attention(
        q, k, v, None, True, 0.0, causal, scale=scale
    )
    return out, lse[..., : q.shape[2]].float()


def attention_lse_flash_vpad(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """`attention_lse` through torch's flash kernel (CUDA only), V padded to the q/k width.

    Causal is top-left aligned, as for `attention_lse_fused`.
    """
    dv = v.shape[-1]
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention(
        q, k, F.pad(v, (0, q.shape[-1] - dv)), 0.0, causal, False, scale=scale
    )[:2]
    return out[..., :dv], lse.float()


def merge_lse(
    parts: list[tuple[torch.Tensor, torch.Tensor]],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Combine partial attentions over disjoint key sets by their log-sum-exps."""
    lse = torch.logsumexp(torch.stack([p[1] for p in parts]), dim=0)
    out = sum(p[0].float() * torch.exp(p[1] - lse)[..., None] for p in parts)
    assert isinstance(out, torch.Tensor)
    return out.to(parts[0][0].dtype), lse


LseAttention = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, float, bool], tuple[torch.Tensor, torch.Tensor]
]


def chunked_prefix_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float,
    chunk: int,
    lse_attention: LseAttention = attention_lse,
) -> torch.Tensor:
    """Expanded extend: prefix keys in chunks (no mask), new keys causally, merged by LSE.

    q [B, H, s, dqk]; k, v cover prefix + s tokens. This is SGLang's MHA_CHUNKED_KV path.
    """
    s, kv = q.shape[2], k.shape[2]
    prefix = kv - s
    parts = [lse_attention(q, k[:, :, prefix:], v[:, :, prefix:], scale, True)]
    for c0 in range(0, prefix, chunk):
        c1 = min(prefix, c0 + chunk)
        parts.append(lse_attention(q, k[:, :, c0:c1], v[:, :, c0:c1], scale, False))
    return merge_lse(parts)[0]


def expand_kv(
    latent: torch.Tensor, k_rope: torch.Tensor, w_kv_b: torch.Tensor, heads: int, d_k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """kv_b up-projection: latent [B, kv, d_c] @ [d_c, H (d_k + d_v)] -> K [B,H,kv,d_k+d_s], V.

    The shared RoPE key [B, kv, d_s] is broadcast to every head.
    """
    b, kv, _ = latent.shape
    kvh = torch.matmul(latent, w_kv_b).view(b, kv, heads, -1)
    k_nope, v = kvh[..., :d_k], kvh[..., d_k:]
    rope = k_rope[:, :, None, :].expand(b, kv, heads, k_rope.shape[-1])
    k = torch.cat([k_nope, rope], dim=-1)
    return k.transpose(1, 2), v.transpose(1, 2)
