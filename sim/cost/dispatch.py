"""MLA path dispatch policies: which computation each request segment of a batch uses.

A policy sees one step's segments (new tokens q, total cache k, decode or not) and returns a path
per segment. Paths: ABSORB (latent-space MLA, FlashMLA-style), EXPAND (MHA over up-projected K/V,
one shot), EXPAND_CHUNKED (expand the prefix chunk by chunk and merge partial outputs by LSE),
SPARSE_ABSORB (DSA: absorbed attention over the indexer's top-k).

A policy that compares costs counts the work the cost model prices: the sparse path visits
`mla.sparse_slots` (all top-k slots per new token), not the ideal `mla.sparse_pairs`.

`choose_paths_grouped` decides many batches at once (one per attention rank of a step), each
as `choose_paths` would alone: a policy that decides segment by segment needs nothing more,
SGLang's (which decides once per extend batch) has a grouped form over per-batch sums.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from sim.cost import mla
from sim.cost.batch import all_equal
from sim.specs.model import ModelSpec

ABSORB, EXPAND, EXPAND_CHUNKED, SPARSE_ABSORB = 0, 1, 2, 3
PATH_NAMES = {
    ABSORB: "absorb",
    EXPAND: "expand",
    EXPAND_CHUNKED: "expand_chunked",
    SPARSE_ABSORB: "sparse_absorb",
}

# SGLang defaults (deepseek_common/attention_backend_handler.py, dsa_backend.py)
SGLANG_CHUNKED_PREFIX_CACHE_THRESHOLD = 8192
SGLANG_MAX_KV_CHUNK_CAPACITY = 131072
SGLANG_DSA_DENSE_KV_THRESHOLD = 2048
# `choose_paths_grouped` of at most this many extend segments: summed in Python, not scattered
FEW_EXTENDS = 16
# flops_optimal: largest expanded K+V (per layer, BF16) built in one shot
EXPANDED_KV_CAP_BYTES = 2 * 1024**3


@dataclass(frozen=True, kw_only=True)
class Segments:
    """The request segments of one batch (one attention rank's forward)."""

    new_tokens: NDArray[np.int64]
    kv_tokens: NDArray[np.int64]
    is_decode: NDArray[np.bool_]

    @property
    def prefix_tokens(self) -> NDArray[np.int64]:
        return self.kv_tokens - self.new_tokens


Policy = Callable[[ModelSpec, Segments, bool, int], NDArray[np.int8]]
_POLICIES: dict[str, Policy] = {}


def register(name: str) -> Callable[[Policy], Policy]:
    def deco(fn: Policy) -> Policy:
        if name in _POLICIES:
            raise ValueError(f"dispatch policy {name!r} is already registered")
        _POLICIES[name] = fn
        return fn

    return deco


def policy_names() -> list[str]:
    return sorted(_POLICIES)


def get_policy(name: str) -> Policy:
    try:
        return _POLICIES[name]
    except KeyError:
        raise ValueError(
            f"unknown MLA dispatch policy {name!r}: known policies are {', '.join(policy_names())}"
        ) from None


def choose_paths(
    policy: str, model: ModelSpec, seg: Segments, *, sparse: bool = False, heads: int | None = None
) -> NDArray[np.int8]:
    """Path per segment under `policy`. `sparse` is True when DSA is active for this model."""
    return get_policy(policy)(model, seg, sparse, heads or model.num_heads)


def choose_paths_grouped(
    policy: str,
    model: ModelSpec,
    seg: Segments,
    groups: NDArray[np.int64],
    *,
    sparse: bool = False,
    heads: int | None = None,
) -> NDArray[np.int8]:
    """Path per segment where segment i belongs to batch `groups[i]` (0, 1, ...): each batch
    decided on its own segments alone, as `choose_paths` of that batch gives."""
    h = heads or model.num_heads
    if policy in SEGMENT_WISE:
        return choose_paths(policy, model, seg, sparse=sparse, heads=h)
    if policy == "sglang":
        return _sglang_grouped(seg, sparse, groups)
    out = np.empty(seg.new_tokens.shape, dtype=np.int8)
    for g in np.unique(groups).tolist():
        sel = groups == g
        q, k, dec = seg.new_tokens[sel], seg.kv_tokens[sel], seg.is_decode[sel]
        one = Segments(new_tokens=q, kv_tokens=k, is_decode=dec)
        out[sel] = choose_paths(policy, model, one, sparse=sparse, heads=h)
    return out


def _sglang_grouped(seg: Segments, sparse: bool, groups: NDArray[np.int64]) -> NDArray[np.int8]:
    """SGLang's path of every batch at once, each decided from its own extend segments' sums
    (and, under DSA, maxima) by group (`_sglang_extend`): decode, idle and spec verify/draft
    run MLA (sparse under DSA)."""
    out = np.full(seg.new_tokens.shape, SPARSE_ABSORB if sparse else ABSORB, dtype=np.int8)
    ext = ~seg.is_decode
    if not np.count_nonzero(ext):
        return out
    g, kv = groups[ext], seg.kv_tokens[ext]
    if g.shape[0] <= FEW_EXTENDS:  # a step's few chunks: summed in Python, exactly
        by_group: dict[int, list[int]] = {}
        for gi, k, q in zip(g.tolist(), kv.tolist(), seg.new_tokens[ext].tolist(), strict=True):
            sums = by_group.setdefault(gi, [0, 0, 0])
            sums[0], sums[1], sums[2] = sums[0] + k, sums[1] + k - q, max(sums[2], k)
        path = {gi: _sglang_extend(k, p, m, sparse) for gi, (k, p, m) in by_group.items()}
        out[ext] = [path[gi] for gi in g.tolist()]
        return out
    n = int(g.max()) + 1
    kv_sum = np.zeros(n, dtype=np.int64)
    np.add.at(kv_sum, g, kv)
    if sparse:
        kv_max = np.zeros(n, dtype=np.int64)
        np.maximum.at(kv_max, g, kv)
        use_mha = (kv_max <= SGLANG_DSA_DENSE_KV_THRESHOLD) & (
            kv_sum <= SGLANG_MAX_KV_CHUNK_CAPACITY
        )
        out[ext] = np.where(use_mha, EXPAND, SPARSE_ABSORB)[g]
        return out
    prefix_sum = np.zeros(n, dtype=np.int64)
    np.add.at(prefix_sum, g, seg.prefix_tokens[ext])
    expands = (prefix_sum == 0) | (prefix_sum >= SGLANG_CHUNKED_PREFIX_CACHE_THRESHOLD)
    one_shot = kv_sum <= SGLANG_MAX_KV_CHUNK_CAPACITY
    path_g = np.where(expands, np.where(one_shot, EXPAND, EXPAND_CHUNKED), ABSORB)
    out[ext] = path_g[g]
    return out


def _sglang_extend(kv_sum: int, prefix_sum: int, kv_max: int, sparse: bool) -> int:
    """SGLang's path of one extend batch from its contexts' sum, its cached prefixes' sum and
    its longest context: under DSA dense MHA only while every sequence fits the top-k window
    and the whole batch fits one KV chunk; else by the batch's prefix sum."""
    if sparse:
        use_mha = kv_max <= SGLANG_DSA_DENSE_KV_THRESHOLD
        return EXPAND if use_mha and kv_sum <= SGLANG_MAX_KV_CHUNK_CAPACITY else SPARSE_ABSORB
    if prefix_sum == 0 or prefix_sum >= SGLANG_CHUNKED_PREFIX_CACHE_THRESHOLD:
        return EXPAND if kv_sum <= SGLANG_MAX_KV_CHUNK_CAPACITY else EXPAND_CHUNKED
    return ABSORB


@register("sglang")
def _sglang(model: ModelSpec, seg: Segments, sparse: bool, heads: int) -> NDArray[np.int8]:
    """SGLang decides once for the whole extend batch: `_sglang_extend` of its sums."""
    out = np.full(seg.new_tokens.shape, SPARSE_ABSORB if sparse else ABSORB, dtype=np.int8)
    ext = ~seg.is_decode
    if not np.count_nonzero(ext):
        return out
    kv = seg.kv_tokens[ext]
    kv_sum = int(np.add.reduce(kv))  # kv.sum() without its Python-level wrapper
    kv_max = int(kv.max()) if sparse else 0
    prefix_sum = kv_sum - int(np.add.reduce(seg.new_tokens[ext]))
    out[ext] = _sglang_extend(kv_sum, prefix_sum, kv_max, sparse)
    return out


@register("vllm")
def _vllm(model: ModelSpec, seg: Segments, sparse: bool, heads: int) -> NDArray[np.int8]:
    # decode tokens -> forward_mqa (absorb); prefill tokens -> MHA, context expanded in chunks
    out = np.where(seg.prefix_tokens > 0, EXPAND_CHUNKED, EXPAND).astype(np.int8)
    out[seg.is_decode] = SPARSE_ABSORB if sparse else ABSORB
    return out


# policies that decide each segment from its own q and k alone
SEGMENT_WISE = frozenset({"vllm", "flops_optimal"})
# policies that run every decode segment on one path, whatever its tokens and context
FIXED_DECODE = frozenset({"sglang", "vllm"})


def fixed_decode_path(policy: str, sparse: bool) -> int | None:
    """The path `policy` gives every decode segment (MLA absorbed, sparse under DSA), or None
    for a policy that decides each decode segment by its shape."""
    if policy not in FIXED_DECODE:
        return None
    return SPARSE_ABSORB if sparse else ABSORB


@register("flops_optimal")
def _flops_optimal(model: ModelSpec, seg: Segments, sparse: bool, heads: int) -> NDArray[np.int8]:
    m = model.mla_spec
    q, k = seg.new_tokens, seg.kv_tokens
    if sparse and model.dsa is not None:  # the slots the sparse kernel visits, as priced
        slots = mla.sparse_slots(q, model.dsa.index_topk)
        absorb = mla.absorb_flops(m, q, k, heads=heads, pairs=slots)
    else:
        absorb = mla.absorb_flops(m, q, k, heads=heads)
    expand = mla.expand_flops(m, q, k, heads=heads)
    expanded_kv_bytes = k * heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim) * 2
    expand_path = np.where(expanded_kv_bytes > EXPANDED_KV_CAP_BYTES, EXPAND_CHUNKED, EXPAND)
    absorb_path = SPARSE_ABSORB if sparse else ABSORB
    return np.where(expand < absorb, expand_path, absorb_path).astype(np.int8)


class MlaPaths:
    """A deployment's MLA path decisions under `policy`: each segment's (`paths`), and the one
    path of a decode side (`decode_path`), the policy's fixed decode path where it has one.
    A model without MLA runs every segment on path 0."""

    def __init__(self, policy: str, model: ModelSpec, heads: int, *, sparse: bool) -> None:
        self.policy, self.model, self.heads, self.sparse = policy, model, heads, sparse
        self.mla = model.attention == "mla"
        self.fixed_decode = fixed_decode_path(policy, sparse) if self.mla else 0

    def paths(
        self,
        q: NDArray[np.int64],
        k: NDArray[np.int64],
        dec: NDArray[np.bool_],
        groups: NDArray[np.int64] | None = None,
    ) -> NDArray[np.int8]:
        """The MLA path of each segment of one rank's forward batch (or of decode segments
        alone, which every policy decides one by one); with `groups`, of several ranks'
        batches at once, segment i in batch `groups[i]`."""
        if not self.mla:
            return np.zeros(len(q), dtype=np.int8)
        seg = Segments(new_tokens=q, kv_tokens=k, is_decode=dec)
        policy, model, heads, sparse = self.policy, self.model, self.heads, self.sparse
        if groups is not None:
            return choose_paths_grouped(policy, model, seg, groups, sparse=sparse, heads=heads)
        return choose_paths(policy, model, seg, sparse=sparse, heads=heads)

    def decode_path(
        self, q: NDArray[np.int64], k: NDArray[np.int64], dec: NDArray[np.bool_]
    ) -> int | None:
        """The one MLA path of decode segments (`dec` all true), or None where they differ:
        the fixed decode path where the policy has one, without an array per segment."""
        if self.fixed_decode is not None:
            return self.fixed_decode
        paths = self.paths(q, k, dec)
        return int(paths[0]) if all_equal(paths) else None
