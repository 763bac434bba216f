"""Turning FLOPs and bytes into seconds through an estimator, with a per-shape memo.

Estimators (calibrated profile lookups or the roofline) are called with the op's true FLOPs and
bytes; the memo keeps, per op shape bucket (2^(1/16) steps in each axis), the ratio of estimated
time to roofline time, so a step re-prices a nearby shape with arithmetic instead of a lookup.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from sim.cost.batch import OpTime
from sim.cost.roofline import OpEstimator, roofline_seconds
from sim.specs.gpu import GpuSpec

SOURCE_RANK = {"roofline": 0, "published": 1, "measured": 2}


def _bucket(x: float) -> int:
    return round(math.log2(x) * 16) if x > 0 else -(10**6)


@dataclass
class Pricer:
    """Prices ops for one deployment; results memoised per shape bucket."""

    gpu: GpuSpec
    estimator: OpEstimator
    _memo: dict[tuple[object, ...], tuple[float, str, bool]] = field(default_factory=dict)

    def op(
        self,
        op: str,
        key: Mapping[str, object],
        point: Mapping[str, float],
        flops: float,
        bytes_: float,
        dtype: str = "bf16",
    ) -> OpTime:
        ideal = roofline_seconds(self.gpu, flops, bytes_, dtype)
        if ideal <= 0.0:
            return OpTime(seconds=0.0, source="roofline")
        memo_key = (
            op,
            tuple(sorted(key.items())),
            dtype,
            tuple(_bucket(v) for v in point.values()),
        )
        hit = self._memo.get(memo_key)
        if hit is None:
            est = self.estimator.estimate(
                op, key=key, point=point, flops=flops, bytes_=bytes_, dtype=dtype
            )
            hit = (est.seconds / ideal, est.source, est.extrapolated)
            self._memo[memo_key] = hit
        return OpTime(seconds=hit[0] * ideal, source=hit[1], extrapolated=hit[2])

    def link(
        self,
        op: str,
        key: Mapping[str, object],
        point: Mapping[str, float],
        bytes_: float,
        link_bytes_per_s: float,
    ) -> OpTime:
        """A collective over a link: calibrated when the estimator knows the op, else bytes/bw."""
        if bytes_ <= 0.0:
            return OpTime(seconds=0.0, source="roofline")
        ideal = bytes_ / link_bytes_per_s
        memo_key = (
            "link",
            op,
            tuple(sorted(key.items())),
            tuple(_bucket(v) for v in point.values()),
        )
        hit = self._memo.get(memo_key)
        if hit is None:
            link_fn = getattr(self.estimator, "link_seconds", None)
            if link_fn is None:
                hit = (1.0, "roofline", False)
            else:
                est = link_fn(
                    op, key=key, point=point, bytes_=bytes_, link_bytes_per_s=link_bytes_per_s
                )
                hit = (est.seconds / ideal, est.source, est.extrapolated)
            self._memo[memo_key] = hit
        return OpTime(seconds=hit[0] * ideal, source=hit[1], extrapolated=hit[2])


def combine(*times: OpTime) -> OpTime:
    """Sum of several priced pieces, labelled with the weakest source among them."""
    live = [t for t in times if t.seconds > 0.0]
    if not live:
        return OpTime(seconds=0.0, source="roofline")
    weakest = min(live, key=lambda t: SOURCE_RANK.get(t.source, 0)).source
    return OpTime(
        seconds=sum(t.seconds for t in live),
        source=weakest,
        extrapolated=any(t.extrapolated for t in live),
    )


def scale(t: OpTime, factor: float) -> OpTime:
    return OpTime(seconds=t.seconds * factor, source=t.source, extrapolated=t.extrapolated)
