"""The attention ops of the profile vocabulary as frozen types (`sim.cost.ops.Op`): MLA decode,
prefill and extend, DSA sparse attention and its indexer, with their FLOPs and bytes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sim.cost import mla
from sim.cost.ops import BF16, FP8_SCALE_GROUP, Op, Work
from sim.specs import profile as p
from sim.specs.model import MlaSpec


def kv_bytes_per_token(m: MlaSpec, kv_dtype: str) -> float:
    """Latent cache bytes per token per layer: BF16, or FlashMLA's FP8 layout (656 B for V3)."""
    if kv_dtype == "bf16":
        return BF16 * (m.kv_lora_rank + m.qk_rope_head_dim)
    if kv_dtype == "fp8":
        return m.kv_lora_rank * (1.0 + 4.0 / FP8_SCALE_GROUP) + BF16 * m.qk_rope_head_dim
    raise ValueError(f"unknown kv_dtype {kv_dtype!r}: use 'bf16' or 'fp8'")


@dataclass(frozen=True)
class DsaIndexerDecode(Op):
    """FP8 keys plus an fp32 scale per cached token; each of next_n queries scores the cache."""

    op: ClassVar[str] = p.DSA_INDEXER_DECODE
    batch: float
    s_kv: float
    next_n: float
    index_heads: float
    index_dim: float

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        width = self.index_heads * self.index_dim
        key_bytes = self.s_kv * (self.index_dim + 4.0)
        b, s = self.batch, self.next_n
        return 2 * b * s * self.s_kv * width, b * key_bytes + b * s * width


@dataclass(frozen=True)
class DsaIndexerPrefill(Op):
    """FP8 keys plus an fp32 scale per cached token; prefill scores causal pairs."""

    op: ClassVar[str] = p.DSA_INDEXER_PREFILL
    s_q: float
    s_kv: float
    index_heads: float
    index_dim: float

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        width = self.index_heads * self.index_dim
        key_bytes = self.s_kv * (self.index_dim + 4.0)
        pairs = float(mla.causal_pairs(self.s_q, self.s_kv))
        return 2 * pairs * width, key_bytes + self.s_q * width


def _qo_latent(m: MlaSpec, h: float) -> float:
    """bf16 query in latent space and latent output, per query token."""
    return BF16 * h * ((m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank)


@dataclass(frozen=True)
class MlaDecode(Op):
    """Absorbed attention core only: the cache read once plus queries in and outputs."""

    op: ClassVar[str] = p.MLA_DECODE
    batch: float
    kv_len: float
    s_q: float
    kv_dtype: str
    heads: float

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        s = self._mla(m)
        b, h = self.batch, self.heads
        pairs = b * float(mla.causal_pairs(self.s_q, self.kv_len))
        cache = b * self.kv_len * kv_bytes_per_token(s, self.kv_dtype)
        return pairs * mla.absorb_pair_flops(s, int(h)), cache + b * self.s_q * _qo_latent(s, h)


@dataclass(frozen=True)
class DsaAttnDecode(Op):
    """The kernel visits all `topk` index slots per query token."""

    op: ClassVar[str] = p.DSA_ATTN_DECODE
    batch: float
    kv_len: float
    s_q: float
    kv_dtype: str
    topk: float
    heads: float

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        s, h, queries = self._mla(m), self.heads, self.batch * self.s_q
        slots = queries * self.topk
        cache = kv_bytes_per_token(s, self.kv_dtype)
        flops = slots * mla.absorb_pair_flops(s, int(h))
        return flops, slots * cache + queries * _qo_latent(s, h)


@dataclass(frozen=True)
class DsaAttnPrefill(Op):
    op: ClassVar[str] = p.DSA_ATTN_PREFILL
    s_q: float
    s_kv: float
    topk: float
    heads: float

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        s, h, queries = self._mla(m), self.heads, self.s_q
        slots = queries * self.topk
        cache = kv_bytes_per_token(s, "bf16")
        flops = slots * mla.absorb_pair_flops(s, int(h))
        return flops, slots * cache + queries * _qo_latent(s, h)


@dataclass(frozen=True)
class MlaPrefill(Op):
    """Expanded attention core only (kv_b is a `gemm`): bf16 q, K, V read, output written."""

    op: ClassVar[str] = p.MLA_PREFILL
    seq_len: float
    prefix_len: float
    heads: float

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        s, h = self._mla(m), self.heads
        q = self.seq_len
        k = self.prefix_len + q
        flops = float(mla.causal_pairs(q, k)) * mla.expand_pair_flops(s, int(h))
        dk, ds, dv = s.qk_nope_head_dim, s.qk_rope_head_dim, s.v_head_dim
        return flops, BF16 * h * ((q + k) * (dk + ds) + (k + q) * dv)


@dataclass(frozen=True)
class MlaPrefillChunked(MlaPrefill):
    op: ClassVar[str] = p.MLA_PREFILL_CHUNKED
    chunk_tokens: float


@dataclass(frozen=True)
class _MlaExtend(Op):
    """The whole path of an extend, projections included; bytes add the absorb weights."""

    new_tokens: float
    prefix_len: float
    heads: float

    def _sizes(self, m: MlaSpec | None) -> tuple[MlaSpec, float, float, float, float]:
        """(spec, new tokens, keys, BF16 cache bytes per token, absorb weight bytes)."""
        s = self._mla(m)
        q = self.new_tokens
        weights = BF16 * self.heads * s.kv_lora_rank * (s.qk_nope_head_dim + s.v_head_dim)
        return s, q, self.prefix_len + q, kv_bytes_per_token(s, "bf16"), weights


@dataclass(frozen=True)
class MlaExtendAbsorb(_MlaExtend):
    op: ClassVar[str] = p.MLA_EXTEND_ABSORB

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        s, q, k, cache, weights = self._sizes(m)
        flops = float(mla.absorb_flops(s, q, k, heads=int(self.heads)))
        return flops, float(mla.absorb_bytes(s, k, kv_bytes_per_token=cache)) + weights


@dataclass(frozen=True)
class MlaExtendExpand(_MlaExtend):
    op: ClassVar[str] = p.MLA_EXTEND_EXPAND

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        s, q, k, cache, weights = self._sizes(m)
        h = int(self.heads)
        flops = float(mla.expand_flops(s, q, k, heads=h))
        nbytes = float(mla.expand_bytes(s, k, heads=h, kv_bytes_per_token=cache))
        return flops, nbytes + weights
