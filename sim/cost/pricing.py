"""Turning an op's work into seconds through an estimator, with a per-shape memo.

An op is named from the profile vocabulary (`sim.specs.profile.OP_ATTRIBUTES`) and described by
all its attributes at a representative point (e.g. a rank's decode batch at its mean context).
The estimator prices the op's reference work at that point (`sim.cost.op_work`, the convention
calibration tables use, so measured points come back exactly); the ratio of that time to its
roofline is then applied to the step's actual work (every request's own context counted). The
ratio is memoised per shape bucket (2^(1/16) steps per numeric attribute). Ops outside the
vocabulary are priced by the roofline fallback: GQA and linear-attention cores at the profile's
attention efficiency (as MLA cores without a table are), the rest at its GEMM efficiency.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from sim.cost.batch import OpTime
from sim.cost.op_work import op_work
from sim.cost.roofline import OpEstimator, RooflineCost, roofline_seconds
from sim.specs.gpu import GpuSpec
from sim.specs.model import MlaSpec
from sim.specs.profile import COMM_OPS, OP_ATTRIBUTES

SOURCE_RANK = {"roofline": 0, "published": 1, "measured": 2}
ZERO = OpTime(seconds=0.0, source="roofline")
# attention cores outside the profile vocabulary: priced like attention, not like GEMMs
FALLBACK_ATTENTION_OPS = frozenset({"gqa_decode", "gqa_prefill", "kda"})
Attrs = Mapping[str, object]


def log_bucket(x: float) -> int:
    """Integer 2^(1/16) bucket of a positive number (0 and below share one bucket)."""
    return round(math.log2(x) * 16) if x > 0 else -(10**6)


def _bucket(v: object) -> object:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return log_bucket(float(v))
    return v


@dataclass
class Pricer:
    """Prices ops for one deployment; ratios to the roofline memoised per shape bucket."""

    gpu: GpuSpec
    estimator: OpEstimator
    mla_spec: MlaSpec | None = None
    fallback: OpEstimator | None = None
    attention_fallback: OpEstimator | None = None  # FALLBACK_ATTENTION_OPS (default: fallback)
    _memo: dict[tuple[object, ...], tuple[float, str, bool]] = field(default_factory=dict)

    def op(self, op: str, attrs: Attrs, flops: float, bytes_: float, dtype: str = "bf16") -> OpTime:
        """Seconds of `op` doing `flops`/`bytes_`, at the efficiency its shape `attrs` has."""
        ideal = roofline_seconds(self.gpu, flops, bytes_, dtype)
        if ideal <= 0.0:
            return ZERO
        memo_key = (op, dtype, *((k, _bucket(v)) for k, v in sorted(attrs.items())))
        hit = self._memo.get(memo_key)
        if hit is None:
            hit = self._ratio(op, attrs, flops, bytes_, dtype)
            self._memo[memo_key] = hit
        return OpTime(seconds=hit[0] * ideal, source=hit[1], extrapolated=hit[2])

    def _ratio(
        self, op: str, attrs: Attrs, flops: float, bytes_: float, dtype: str
    ) -> tuple[float, str, bool]:
        if op not in OP_ATTRIBUTES:
            fallback = self.fallback
            if op in FALLBACK_ATTENTION_OPS and self.attention_fallback is not None:
                fallback = self.attention_fallback
            est = (fallback or RooflineCost(self.gpu)).estimate(
                op, key=attrs, point={}, flops=flops, bytes_=bytes_, dtype=dtype
            )
            return est.seconds / roofline_seconds(self.gpu, flops, bytes_, dtype), est.source, False
        ref_flops, ref_bytes = op_work(op, attrs, mla_spec=self.mla_spec, dtype=dtype)
        est = self.estimator.estimate(
            op, key=attrs, point={}, flops=ref_flops, bytes_=ref_bytes, dtype=dtype
        )
        ref = roofline_seconds(self.gpu, ref_flops, ref_bytes, dtype)
        return est.seconds / ref, est.source, est.extrapolated

    def link(self, op: str, attrs: Attrs, bytes_: float, link_bytes_per_s: float) -> OpTime:
        """A collective moving `bytes_` per GPU over a link, at the efficiency its shape has."""
        if bytes_ <= 0.0:
            return ZERO
        ideal = bytes_ / link_bytes_per_s
        memo_key = ("link", op, *((k, _bucket(v)) for k, v in sorted(attrs.items())))
        hit = self._memo.get(memo_key)
        if hit is None:
            assert op in COMM_OPS, op
            _, ref_bytes = op_work(op, attrs)
            link_fn = getattr(self.estimator, "link_seconds", None)
            if link_fn is None or ref_bytes <= 0:
                hit = (1.0, "roofline", False)
            else:
                est = link_fn(
                    op, key=attrs, point={}, bytes_=ref_bytes, link_bytes_per_s=link_bytes_per_s
                )
                hit = (est.seconds / (ref_bytes / link_bytes_per_s), est.source, est.extrapolated)
            self._memo[memo_key] = hit
        return OpTime(seconds=hit[0] * ideal, source=hit[1], extrapolated=hit[2])


def combine(*times: OpTime) -> OpTime:
    """Sum of several priced pieces, labelled with the weakest source among them."""
    live = [t for t in times if t.seconds > 0.0]
    if not live:
        return ZERO
    weakest = min(live, key=lambda t: SOURCE_RANK.get(t.source, 0)).source
    return OpTime(
        seconds=sum(t.seconds for t in live),
        source=weakest,
        extrapolated=any(t.extrapolated for t in live),
    )


def scale(t: OpTime, factor: float) -> OpTime:
    return OpTime(seconds=t.seconds * factor, source=t.source, extrapolated=t.extrapolated)
