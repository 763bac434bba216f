"""The attention ops as frozen types (`sim.cost.ops.Op`): MLA decode, prefill and extend, DSA
sparse attention and its indexer (each a table op), the GQA, KDA and DSA top-k cores (no table:
the roofline prices them); and every table op's type by name (`OP_TYPES`, `op_at`).

An attention op's attributes are one representative request (a decode batch at its mean
context, a prefill at its mean length and prefix), which is where its table is read. Built with
`segments` (`over`), its work is each request's own, summed: the step's new tokens and context
per request, at the deployment's bytes per cached token; without, the table's own convention at
its attributes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from sim.cost import mla
from sim.cost.ops import (
    BF16,
    FP8_SCALE_GROUP,
    AllGather,
    AllReduce,
    AllToAll,
    Bmm,
    Elementwise,
    EpCombine,
    EpDispatch,
    Gemm,
    Moe,
    MoeDown,
    MoeUp,
    Op,
    Work,
)
from sim.specs import profile as p
from sim.specs.model import MlaSpec

Array = NDArray[np.float64]


def kv_bytes_per_token(m: MlaSpec, kv_dtype: str) -> float:
    """Latent cache bytes per token per layer: BF16, or FlashMLA's FP8 layout (656 B for V3)."""
    if kv_dtype == "bf16":
        return BF16 * (m.kv_lora_rank + m.qk_rope_head_dim)
    if kv_dtype == "fp8":
        return m.kv_lora_rank * (1.0 + 4.0 / FP8_SCALE_GROUP) + BF16 * m.qk_rope_head_dim
    raise ValueError(f"unknown kv_dtype {kv_dtype!r}: use 'bf16' or 'fp8'")


def _mean(x: Array) -> float:
    """`float(x.mean())` of a non-empty float64 array: the same pairwise sum divided by the same
    count, in one call instead of `np.mean`'s several (a step prices hundreds of attention ops,
    each with a mean or two)."""
    return float(x.sum()) / x.shape[0]


@dataclass(frozen=True, eq=False)
class Segments:
    """The requests an attention op runs in a step: new tokens `q` and keys `k` (new ones
    included) of each, and the bytes one cached token takes in the deployment's cache."""

    q: Array
    k: Array
    cache_bytes: float


@dataclass(frozen=True)
class _OverRequests(Op):
    """An attention op whose work sums over requests (`segments`), not a table attribute."""

    segments: Segments | None = field(default=None, compare=False, kw_only=True, repr=False)

    def _requests(
        self, point: tuple[float, float, float, float]
    ) -> tuple[Array, Array, float, float]:
        """(q and k per request, the requests each stands for, cache bytes per token): the
        segments', else `point` (q, k, count, cache bytes: the table's op at its attributes)."""
        if self.segments is not None:
            return self.segments.q, self.segments.k, 1.0, self.segments.cache_bytes
        q, k, n, cache = point
        return np.array([q]), np.array([k]), n, cache


def _qo_latent(m: MlaSpec, h: float) -> float:
    """bf16 query in latent space and latent output, per query token."""
    return BF16 * h * ((m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank)


@dataclass(frozen=True)
class DsaIndexerDecode(_OverRequests):
    """FP8 keys plus an fp32 scale per cached token; each of next_n queries scores the cache."""

    op: ClassVar[str] = p.DSA_INDEXER_DECODE
    batch: float
    s_kv: float
    next_n: float
    index_heads: float
    index_dim: float

    @classmethod
    def over(cls, s: Segments, heads: float, dim: float) -> DsaIndexerDecode:
        n = float(s.q.max())
        return cls(float(len(s.q)), _mean(s.k), n, heads, dim, segments=s)

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        width = self.index_heads * self.index_dim
        point = (self.next_n, self.s_kv, self.batch, self.index_dim + 4.0)
        q, k, n, key_bytes = self._requests(point)
        flops = 2 * n * float(np.sum(q * k)) * width
        return flops, n * (float(k.sum()) * key_bytes + float(q.sum()) * width)


@dataclass(frozen=True)
class DsaIndexerPrefill(_OverRequests):
    """FP8 keys plus an fp32 scale per cached token; prefill scores causal pairs (`s_q`: all
    the new tokens, `s_kv`: the mean context)."""

    op: ClassVar[str] = p.DSA_INDEXER_PREFILL
    s_q: float
    s_kv: float
    index_heads: float
    index_dim: float

    @classmethod
    def over(cls, s: Segments, heads: float, dim: float) -> DsaIndexerPrefill:
        return cls(float(s.q.sum()), _mean(s.k), heads, dim, segments=s)

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        width = self.index_heads * self.index_dim
        q, k, _, key_bytes = self._requests((self.s_q, self.s_kv, 1.0, self.index_dim + 4.0))
        pairs = float(np.sum(mla.causal_pairs(q, k)))
        return 2 * pairs * width, float(k.sum()) * key_bytes + float(q.sum()) * width


@dataclass(frozen=True)
class MlaDecode(_OverRequests):
    """Absorbed attention core only: the cache read once plus queries in and outputs."""

    op: ClassVar[str] = p.MLA_DECODE
    batch: float
    kv_len: float
    s_q: float
    kv_dtype: str
    heads: float

    @classmethod
    def over(cls, s: Segments, kv_dtype: str, heads: float) -> MlaDecode:
        return cls(float(len(s.q)), _mean(s.k), int(s.q.max()), kv_dtype, heads, segments=s)

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        spec, h = self._mla(m), self.heads
        point = (self.s_q, self.kv_len, self.batch, kv_bytes_per_token(spec, self.kv_dtype))
        q, k, n, cache = self._requests(point)
        flops = n * float(np.sum(mla.causal_pairs(q, k))) * mla.absorb_pair_flops(spec, int(h))
        return flops, n * (float(k.sum()) * cache + float(q.sum()) * _qo_latent(spec, h))


@dataclass(frozen=True)
class DsaAttnDecode(_OverRequests):
    """The kernel visits all `topk` index slots per query token (`mla.sparse_slots`)."""

    op: ClassVar[str] = p.DSA_ATTN_DECODE
    batch: float
    kv_len: float
    s_q: float
    kv_dtype: str
    topk: float
    heads: float

    @classmethod
    def over(cls, s: Segments, kv_dtype: str, topk: float, heads: float) -> DsaAttnDecode:
        q_max, kv = int(s.q.max()), _mean(s.k)
        return cls(float(len(s.q)), kv, q_max, kv_dtype, topk, heads, segments=s)

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        spec = self._mla(m)
        point = (self.s_q, self.kv_len, self.batch, kv_bytes_per_token(spec, self.kv_dtype))
        q, _, n, cache = self._requests(point)
        return _sparse_work(spec, n * float(q.sum()), self.topk, self.heads, cache)


@dataclass(frozen=True)
class DsaAttnPrefill(_OverRequests):
    """As `DsaAttnDecode`, for extend and prefill tokens (`s_q`: all of them)."""

    op: ClassVar[str] = p.DSA_ATTN_PREFILL
    s_q: float
    s_kv: float
    topk: float
    heads: float

    @classmethod
    def over(cls, s: Segments, topk: float, heads: float) -> DsaAttnPrefill:
        return cls(float(s.q.sum()), _mean(s.k), topk, heads, segments=s)

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        spec = self._mla(m)
        point = (self.s_q, self.s_kv, 1.0, kv_bytes_per_token(spec, "bf16"))
        q, _, _, cache = self._requests(point)
        return _sparse_work(spec, float(q.sum()), self.topk, self.heads, cache)


def _sparse_work(m: MlaSpec, queries: float, topk: float, h: float, cache: float) -> Work:
    slots = float(mla.sparse_slots(queries, int(topk)))
    return slots * mla.absorb_pair_flops(m, int(h)), slots * cache + queries * _qo_latent(m, h)


@dataclass(frozen=True)
class MlaPrefill(_OverRequests):
    """Expanded attention core only (kv_b is a `gemm`): bf16 q, K, V read, output written."""

    op: ClassVar[str] = p.MLA_PREFILL
    seq_len: float
    prefix_len: float
    heads: float

    @classmethod
    def over(cls, s: Segments, heads: float, **chunk: float) -> MlaPrefill:
        q_mean, prefix = _mean(s.q), _mean(s.k - s.q)
        return cls(q_mean, prefix, heads, **chunk, segments=s)  # type: ignore[arg-type]

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        spec, h = self._mla(m), self.heads
        point = (self.seq_len, self.prefix_len + self.seq_len, 1.0, 0.0)
        q, k, _, _ = self._requests(point)
        flops = float(np.sum(mla.causal_pairs(q, k))) * mla.expand_pair_flops(spec, int(h))
        dk, ds, dv = spec.qk_nope_head_dim, spec.qk_rope_head_dim, spec.v_head_dim
        return flops, BF16 * h * float(((q + k) * (dk + ds) + (k + q) * dv).sum())


@dataclass(frozen=True)
class MlaPrefillChunked(MlaPrefill):
    op: ClassVar[str] = p.MLA_PREFILL_CHUNKED
    chunk_tokens: float


@dataclass(frozen=True)
class _MlaExtend(_OverRequests):
    """The whole path of an extend, projections included; bytes add the absorb weights once."""

    new_tokens: float
    prefix_len: float
    heads: float

    @classmethod
    def over(cls, s: Segments, heads: float) -> _MlaExtend:
        q_mean, prefix = _mean(s.q), _mean(s.k - s.q)
        return cls(q_mean, prefix, heads, segments=s)

    def _sizes(self, m: MlaSpec | None) -> tuple[MlaSpec, Array, Array, float, float]:
        """(spec, new tokens, keys, cache bytes per token, absorb weight bytes)."""
        s = self._mla(m)
        keys = self.prefix_len + self.new_tokens
        q, k, _, cache = self._requests((self.new_tokens, keys, 1.0, kv_bytes_per_token(s, "bf16")))
        weights = BF16 * self.heads * s.kv_lora_rank * (s.qk_nope_head_dim + s.v_head_dim)
        return s, q, k, cache, weights


@dataclass(frozen=True)
class MlaExtendAbsorb(_MlaExtend):
    op: ClassVar[str] = p.MLA_EXTEND_ABSORB

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        s, q, k, cache, weights = self._sizes(m)
        flops = float(np.sum(mla.absorb_flops(s, q, k, heads=int(self.heads))))
        return flops, float(np.sum(mla.absorb_bytes(s, k, kv_bytes_per_token=cache))) + weights


@dataclass(frozen=True)
class MlaExtendExpand(_MlaExtend):
    op: ClassVar[str] = p.MLA_EXTEND_EXPAND

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        s, q, k, cache, weights = self._sizes(m)
        h = int(self.heads)
        flops = float(np.sum(mla.expand_flops(s, q, k, heads=h)))
        nbytes = float(np.sum(mla.expand_bytes(s, k, heads=h, kv_bytes_per_token=cache)))
        return flops, nbytes + weights


@dataclass(frozen=True)
class GqaDecode(_OverRequests):
    """A GQA attention core (no table: the roofline prices it): 4 x heads x head_dim FLOPs per
    causal pair, the K and V cache read once (`Segments.cache_bytes`: all KV heads of a token)."""

    op: ClassVar[str] = "gqa_decode"
    heads: float
    batch: float
    kv_len: float
    head_dim: float

    @classmethod
    def over(cls, s: Segments, heads: float, head_dim: float) -> GqaDecode:
        return cls(heads, float(len(s.q)), _mean(s.k), head_dim, segments=s)

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        q, k, n, cache = self._requests((1.0, self.kv_len, self.batch, 0.0))
        pairs = n * float(np.sum(mla.causal_pairs(q, k)))
        return pairs * 4.0 * self.heads * self.head_dim, n * float(k.sum()) * cache


@dataclass(frozen=True)
class GqaPrefill(GqaDecode):
    op: ClassVar[str] = "gqa_prefill"


@dataclass(frozen=True)
class Kda(Op):
    """A KDA (linear attention) layer's recurrent-state update (no table): 4 x head_dim^2 FLOPs
    per head and token, each request's state read and written once."""

    op: ClassVar[str] = "kda"
    heads: float
    batch: float
    tokens: float
    head_dim: float
    state_bytes_per_elem: float

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        h, d = self.heads, self.head_dim
        state = h * d * d * self.state_bytes_per_elem
        return self.tokens * 4.0 * h * d * d, 2.0 * state * self.batch


@dataclass(frozen=True)
class DsaTopk(_OverRequests):
    """DSA's top-k selection over the indexer's scores (no table: the published indexer figures
    time the logits kernel only): one read of each query token's fp32 scores (every cached
    token in decode and verify, the causal ones in extend and prefill) and a write of its
    `topk` int32 indices, as SGLang's fused top-k kernel makes one pass over each row."""

    op: ClassVar[str] = "dsa_topk"
    tokens: float
    kv_len: float
    topk: float
    decode: NDArray[np.bool_] | None = field(default=None, compare=False, kw_only=True, repr=False)

    @classmethod
    def over(cls, s: Segments, decode: NDArray[np.bool_], topk: float) -> DsaTopk:
        return cls(float(s.q.sum()), _mean(s.k), topk, segments=s, decode=decode)

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        q, k, _, _ = self._requests((self.tokens, self.kv_len, 1.0, 0.0))
        decode = np.zeros(len(q), dtype=bool) if self.decode is None else self.decode
        rows = float(np.sum(np.where(decode, q * k, mla.causal_pairs(q, k))))
        return 0.0, 4.0 * rows + 4.0 * float(q.sum()) * min(self.topk, float(k.max()))


# each table op's type: every op of the vocabulary has its work convention by construction
# (tests/cost/test_ops.py checks the two name the same ops)
OP_TYPES: Mapping[str, type[Op]] = {
    t.op: t
    for t in (Gemm, Bmm, MoeUp, MoeDown, Moe, Elementwise, EpDispatch, EpCombine, AllGather,
              AllToAll, AllReduce, DsaIndexerDecode, DsaIndexerPrefill, MlaDecode, DsaAttnDecode,
              DsaAttnPrefill, MlaPrefill, MlaPrefillChunked, MlaExtendAbsorb, MlaExtendExpand)
}  # fmt: skip


def op_at(op: str, attrs: Mapping[str, object]) -> Op:
    """The table op `op` at `attrs`; ValueError for an unknown op or a missing or wrong
    attribute."""
    p.check_op(op)
    missing = [a for a in p.OP_ATTRIBUTES[op] if a not in attrs]
    if missing:
        raise ValueError(f"{op} needs attributes {missing}")
    return OP_TYPES[op].of(attrs)
