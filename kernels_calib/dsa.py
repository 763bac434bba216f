"""DSA (DeepSeek sparse attention): the indexer (scoring + top-k) and sparse latent attention.

Indexer: each new token's `index_heads` queries score every cached index key (ReLU, weighted
sum over heads), then the top `topk` tokens are kept. Sparse attention: absorbed MLA over the
gathered top-k latent rows of each token. Torch fallbacks in BF16; the sparse attention is
checked against dense latent attention with every token selected before it is timed.
"""

from __future__ import annotations

import math

import torch

from kernels_calib import correctness, mla_torch
from kernels_calib.context import Ctx, Row
from sim.catalog import load_model
from sim.specs.model import DsaSpec
from sim.specs.profile import KeyValue

NEXT_N = (1, 2)


def dsa_spec(ctx: Ctx) -> DsaSpec | None:
    """The model's DSA indexer, or DeepSeek-V3.2's when the model has none but the same MLA."""
    if ctx.model.dsa is not None:
        return ctx.model.dsa
    other = load_model("deepseek-v3.2")
    return other.dsa if other.mla_spec == ctx.mla else None


def _prefill_grid(ctx: Ctx) -> list[tuple[int, int]]:
    return [(s, kv) for s in ctx.plan.dsa_prefill_s_q for kv in ctx.plan.dsa_kv if kv >= s]


def count(ctx: Ctx) -> int:
    p = ctx.plan
    decode = len(p.dsa_batch) * len(p.dsa_kv)
    return decode * (len(NEXT_N) + 1) + 2 * len(_prefill_grid(ctx))


def index_scores(q: torch.Tensor, k: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """q [B, n, Hi, D], keys [B, S, D], head weights [B, n, Hi] -> scores [B, n, S]."""
    b, n, hi, d = q.shape
    logits = torch.bmm(q.reshape(b, n * hi, d), k.transpose(1, 2)).relu_()
    return (logits.view(b, n, hi, -1) * w[..., None]).sum(dim=2)


def indexer(q: torch.Tensor, k: torch.Tensor, w: torch.Tensor, topk: int) -> torch.Tensor:
    """Top-k token indices [B, n, topk] per new token (the last n tokens: causal)."""
    scores = index_scores(q, k, w)
    n, s = scores.shape[1], scores.shape[2]
    if n > 1:
        scores = scores + mla_torch.causal_bias(n, s, scores.device)
    return scores.topk(min(topk, s), dim=-1).indices


def sparse_attention(
    q: torch.Tensor, cache: torch.Tensor, idx: torch.Tensor, d_c: int, scale: float
) -> torch.Tensor:
    """q [B, n, H, W], cache [B, S, W], idx [B, n, k] -> latent out [B, n, H, d_c]."""
    b, n, h, width = q.shape
    rows = torch.arange(b, device=q.device)[:, None, None]
    picked = cache[rows, idx].view(b * n, -1, width)  # [B n, k, W]
    scores = torch.bmm(q.reshape(b * n, h, width), picked.transpose(1, 2)).float() * scale
    probs = torch.softmax(scores, dim=-1).to(q.dtype)
    return torch.bmm(probs, picked[..., :d_c]).view(b, n, h, d_c)


def _check(ctx: Ctx) -> bool:
    m = ctx.mla
    width = m.kv_lora_rank + m.qk_rope_head_dim
    q, cache = ctx.randn(2, 1, 8, width), ctx.randn(2, 96, width)
    idx = torch.arange(96, device=ctx.device).expand(2, 1, 96)
    scale = 1 / math.sqrt(m.qk_nope_head_dim + m.qk_rope_head_dim)
    want = mla_torch.latent_attention(q.float(), cache.float(), m.kv_lora_rank, scale)
    got = sparse_attention(q, cache, idx, m.kv_lora_rank, scale).float()
    result = correctness.compare(
        got,
        want,
        correctness.REL_ERROR_BOUND["bf16"],
        "dsa sparse attention (all tokens kept) vs dense",
    )
    ctx.notes.append(result.message)
    return result.ok


def run(ctx: Ctx) -> None:
    spec = dsa_spec(ctx)
    if spec is None or not _check(ctx):
        why = "no DSA indexer for this MLA shape" if spec is None else "sparse attention failed"
        ctx.notes.append(f"dsa: {why}; not timed")
        for _ in range(count(ctx)):
            ctx.advance("dsa skipped")
        return
    p, m, h = ctx.plan, ctx.mla, ctx.plan.heads
    hi, di, topk = spec.index_n_heads, spec.index_head_dim, spec.index_topk
    width, d_c = m.kv_lora_rank + m.qk_rope_head_dim, m.kv_lora_rank
    scale = 1 / math.sqrt(m.qk_nope_head_dim + m.qk_rope_head_dim)
    index: dict[str, KeyValue] = {"index_heads": hi, "index_dim": di}
    for n in NEXT_N:
        rows: list[Row] = []
        for b in p.dsa_batch:
            for kv in p.dsa_kv:
                ctx.advance(f"dsa indexer decode next_n={n} b={b} s_kv={kv}")
                q, k = ctx.randn(b, n, hi, di), ctx.randn(b, kv, di)
                w = ctx.randn(b, n, hi, dtype=torch.float32)
                rows.append(((float(b), float(kv)), ctx.time_call(indexer, q, k, w, topk)))
        ctx.add(
            "dsa_indexer_decode",
            {**index, "next_n": n},
            ("batch", "s_kv"),
            rows,
            dtype="bf16",
            impl="torch_bmm_topk",
        )
    rows = []
    for b in p.dsa_batch:
        for kv in p.dsa_kv:
            ctx.advance(f"dsa attention decode b={b} kv={kv}")
            q, cache = ctx.randn(b, 1, h, width), ctx.randn(b, kv, width)
            idx = torch.randint(0, kv, (b, 1, topk), generator=ctx.gen, device=ctx.device)
            rows.append(
                (
                    (float(b), float(kv)),
                    ctx.time_call(sparse_attention, q, cache, idx, d_c, scale),
                )
            )
    key: dict[str, KeyValue] = {"s_q": 1, "kv_dtype": "bf16", "topk": topk, "heads": h}
    ctx.add(
        "dsa_attn_decode", key, ("batch", "kv_len"), rows, dtype="bf16", impl="torch_gather_bmm"
    )
    _run_prefill(ctx, spec, scale)


def _index_prefill(q: torch.Tensor, k: torch.Tensor, w: torch.Tensor, topk: int, step: int) -> None:
    """Indexer over s_q new tokens at the end of the keys, `step` tokens per slice."""
    s_q, kv = q.shape[1], k.shape[1]
    for s0 in range(0, s_q, step):  # a slice sees the keys up to its own last token
        end = kv - s_q + min(s_q, s0 + step)
        indexer(q[:, s0 : s0 + step], k[:, :end], w[:, s0 : s0 + step], topk)


def _attend_prefill(
    q: torch.Tensor, cache: torch.Tensor, idx: torch.Tensor, d_c: int, scale: float, step: int
) -> None:
    for s0 in range(0, q.shape[1], step):
        sparse_attention(q[:, s0 : s0 + step], cache, idx[:, s0 : s0 + step], d_c, scale)


def _run_prefill(ctx: Ctx, spec: DsaSpec, scale: float) -> None:
    """Prefill: s_q new tokens at the end of s_kv, processed in slices of new tokens."""
    m, h, topk = ctx.mla, ctx.plan.heads, spec.index_topk
    width, d_c = m.kv_lora_rank + m.qk_rope_head_dim, m.kv_lora_rank
    budget = mla_torch.SCORE_BUDGET_BYTES  # per slice: bf16 logits + fp32 weighted scores ...
    index_step = max(1, budget // (6 * spec.index_n_heads * max(ctx.plan.dsa_kv)))
    attn_step = max(1, budget // (topk * (2 * width + 6 * h)))  # ... gathered rows + scores
    index_rows: list[Row] = []
    attn_rows: list[Row] = []
    for s_q, kv in _prefill_grid(ctx):
        ctx.advance(f"dsa indexer prefill s_q={s_q} s_kv={kv}")
        q = ctx.randn(1, s_q, spec.index_n_heads, spec.index_head_dim)
        k = ctx.randn(1, kv, spec.index_head_dim)
        w = ctx.randn(1, s_q, spec.index_n_heads, dtype=torch.float32)
        timing = ctx.time_call(_index_prefill, q, k, w, topk, index_step)
        index_rows.append(((float(s_q), float(kv)), timing))
        ctx.advance(f"dsa attention prefill s_q={s_q} s_kv={kv}")
        qa, cache = ctx.randn(1, s_q, h, width), ctx.randn(1, kv, width)
        idx = torch.randint(0, kv, (1, s_q, topk), generator=ctx.gen, device=ctx.device)

        timing = ctx.time_call(_attend_prefill, qa, cache, idx, d_c, scale, attn_step)
        attn_rows.append(((float(s_q), float(kv)), timing))
    index: dict[str, KeyValue] = {
        "index_heads": spec.index_n_heads,
        "index_dim": spec.index_head_dim,
    }
    ctx.add(
        "dsa_indexer_prefill",
        index,
        ("s_q", "s_kv"),
        index_rows,
        dtype="bf16",
        impl="torch_bmm_topk",
    )
    ctx.add(
        "dsa_attn_prefill",
        {"topk": topk, "heads": h},
        ("s_q", "s_kv"),
        attn_rows,
        dtype="bf16",
        impl="torch_gather_bmm",
    )
