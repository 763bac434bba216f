"""Turning an op into seconds: its `Rate` at its shape, memoised, applied to the work it does.

An op (`sim.cost.ops`, `sim.cost.attention_ops`) holds its shape (a representative point: a
rank's decode batch at its mean context) and counts its own work (every request's own context).
The estimator answers with the op's `Rate` at the shape (`sim.cost.calibrated`, or the roofline);
the op's work is priced at that rate, so a launch is paid once per call whatever the ratio of
actual to reference work. Rates are memoised per shape (an entry is what pricing that shape
gives; callers round their shapes, e.g. `sim.cost.rank_shape`, so that shapes repeat). Ops
outside the vocabulary go to the roofline fallback: GQA and linear-attention cores at the
profile's attention efficiency (as MLA cores without a table are), the rest at its GEMM one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.cost.memo import BoundedCache
from sim.cost.ops import Op, elem_bytes
from sim.cost.rate import ZERO, OpTime, Rate
from sim.cost.roofline import OpEstimator, RooflineCost
from sim.specs.gpu import GpuSpec
from sim.specs.model import MlaSpec
from sim.specs.profile import COMM_OPS, OP_ATTRIBUTES

# attention cores outside the profile vocabulary: priced like attention, not like GEMMs
FALLBACK_ATTENTION_OPS = frozenset({"gqa_decode", "gqa_prefill", "kda"})
RATE_MEMO_ENTRIES = 200_000
LINK_ROOFLINE = Rate(compute_s_per_s=0.0, memory_s_per_s=1.0, fixed_s=0.0, source="roofline")


@dataclass
class Pricer:
    """Prices ops for one deployment (`mla`: the model's MLA shape, for attention work)."""

    gpu: GpuSpec
    estimator: OpEstimator
    fallback: OpEstimator | None = None
    attention_fallback: OpEstimator | None = None  # FALLBACK_ATTENTION_OPS (default: fallback)
    mla: MlaSpec | None = None
    _memo: BoundedCache[tuple[object, ...], Rate] = field(
        default_factory=lambda: BoundedCache(RATE_MEMO_ENTRIES)
    )

    def has_table(self, op: str) -> bool:
        """Whether the estimator holds a measured or published table for `op`."""
        return bool(getattr(self.estimator, "has_table", lambda _: False)(op))

    def rate(self, op: Op, dtype: str = "bf16") -> Rate:
        """The op's rate at its shape (computing in `dtype`), memoised."""
        return self._memo.get((op, dtype), lambda: self._estimator(op).rate(op, dtype))

    def price(self, op: Op, dtype: str = "bf16", *, runs: Op | None = None) -> OpTime:
        """Seconds of `op`'s work (or of `runs`', the op a step runs where it reads other than
        the shape its table is read at: the experts actually touched) at `op`'s rate."""
        flops, bytes_ = (runs or op).work(self.mla, elem_bytes(dtype))
        compute_s = flops / self.gpu.peak_flops_per_s(dtype)
        memory_s = bytes_ / self.gpu.hbm_bytes_per_s
        if compute_s <= 0.0 and memory_s <= 0.0:
            return ZERO
        return self.rate(op, dtype).time(compute_s, memory_s)

    def _estimator(self, op: Op) -> OpEstimator:
        if op.op in OP_ATTRIBUTES:
            return self.estimator
        if op.op in FALLBACK_ATTENTION_OPS and self.attention_fallback is not None:
            return self.attention_fallback
        return self.fallback or RooflineCost(self.gpu)

    def link(self, op: Op, link_bytes_per_s: float, *, runs: Op | None = None) -> OpTime:
        """A collective's bytes per GPU (`op`'s work, or `runs`' as in `price`) over a link of
        that speed, at `op`'s rate."""
        bytes_ = (runs or op).work(None, 1.0)[1]
        if bytes_ <= 0.0:
            return ZERO
        assert op.op in COMM_OPS, op.op
        link_rate = getattr(self.estimator, "link_rate", None)

        def rate() -> Rate:
            return LINK_ROOFLINE if link_rate is None else link_rate(op, link_bytes_per_s)  # type: ignore[no-any-return]

        return self._memo.get(("link", op, link_bytes_per_s), rate).time(
            0.0, bytes_ / link_bytes_per_s
        )
