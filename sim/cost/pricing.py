"""Turning an op's work into seconds: one `Rate` per shape, read from the estimator, memoised.

An op is named from the profile vocabulary (`sim.specs.profile.OP_ATTRIBUTES`) and described by
all its attributes at a representative point (e.g. a rank's decode batch at its mean context).
The estimator answers with the op's `Rate` at that point directly (`sim.cost.calibrated`: seconds
per roofline second and per launch, as its table rule reads them there; `sim.cost.roofline`:
the inverse efficiencies and launch overhead). The step's actual work (every request's own
context counted) is priced at that rate, so the launch is paid once per call whatever the ratio
of actual to reference work. Rates are memoised per shape (its attributes exactly: an entry is
what pricing that shape gives; callers round their shapes, e.g. `sim.cost.rank_shape`, so that
shapes repeat). Ops outside the vocabulary are priced by the roofline fallback: GQA and
linear-attention cores at the profile's attention efficiency (as MLA cores without a table
are), the rest at its GEMM efficiency.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sim.cost.memo import BoundedCache
from sim.cost.rate import ZERO, OpTime, Rate
from sim.cost.roofline import OpEstimator, RooflineCost
from sim.specs.gpu import GpuSpec
from sim.specs.profile import COMM_OPS, OP_ATTRIBUTES

# attention cores outside the profile vocabulary: priced like attention, not like GEMMs
FALLBACK_ATTENTION_OPS = frozenset({"gqa_decode", "gqa_prefill", "kda"})
RATE_MEMO_ENTRIES = 200_000
Attrs = Mapping[str, object]


@dataclass
class Pricer:
    """Prices ops for one deployment; each shape's rate memoised."""

    gpu: GpuSpec
    estimator: OpEstimator
    fallback: OpEstimator | None = None
    attention_fallback: OpEstimator | None = None  # FALLBACK_ATTENTION_OPS (default: fallback)
    _memo: BoundedCache[tuple[object, ...], Rate] = field(
        default_factory=lambda: BoundedCache(RATE_MEMO_ENTRIES)
    )

    def has_table(self, op: str) -> bool:
        """Whether the estimator holds a measured or published table for `op`."""
        return bool(getattr(self.estimator, "has_table", lambda _: False)(op))

    def op(self, op: str, attrs: Attrs, flops: float, bytes_: float, dtype: str = "bf16") -> OpTime:
        """Seconds of `op` doing `flops`/`bytes_`, at the rate its shape `attrs` has."""
        compute_s = flops / self.gpu.peak_flops_per_s(dtype)
        memory_s = bytes_ / self.gpu.hbm_bytes_per_s
        if compute_s <= 0.0 and memory_s <= 0.0:
            return ZERO
        memo_key = (op, dtype, *sorted(attrs.items()))
        hit = self._memo.get(memo_key, lambda: self._rate(op, attrs, dtype))
        return hit.time(compute_s, memory_s)

    def _rate(self, op: str, attrs: Attrs, dtype: str) -> Rate:
        if op in OP_ATTRIBUTES:
            return self.estimator.rate(op, attrs, dtype)
        estimator = self.fallback or RooflineCost(self.gpu)
        if op in FALLBACK_ATTENTION_OPS and self.attention_fallback is not None:
            estimator = self.attention_fallback
        return estimator.rate(op, attrs, dtype)

    def link(self, op: str, attrs: Attrs, bytes_: float, link_bytes_per_s: float) -> OpTime:
        """A collective moving `bytes_` per GPU over a link, at the rate its shape has."""
        if bytes_ <= 0.0:
            return ZERO
        assert op in COMM_OPS, op
        memo_key = ("link", op, link_bytes_per_s, *sorted(attrs.items()))
        link_rate = getattr(self.estimator, "link_rate", None)

        def rate() -> Rate:
            if link_rate is None:
                return Rate(compute_s_per_s=0.0, memory_s_per_s=1.0, fixed_s=0.0, source="roofline")
            return link_rate(op, attrs, link_bytes_per_s)  # type: ignore[no-any-return]

        return self._memo.get(memo_key, rate).time(0.0, bytes_ / link_bytes_per_s)
