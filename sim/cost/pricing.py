"""Turning an op's work into seconds through an estimator, with a per-shape memo.

An op is named from the profile vocabulary (`sim.specs.profile.OP_ATTRIBUTES`) and described by
all its attributes at a representative point (e.g. a rank's decode batch at its mean context).
The estimator prices the op's reference work at that point (`sim.cost.op_work`, the convention
calibration tables use, so measured points come back exactly). At a fixed shape an estimate is
taken as `max(FLOPs / peak x compute rate, bytes / bandwidth x memory rate) + fixed`. Probing the
estimator with the reference FLOPs alone (once, and twice over) and its bytes alone recovers the
three: for a table read as measured, 1 / the efficiency each resource is credited with there
(`sim.cost.calibrated`) and the table's own fixed part (`table_grid`: what its smallest point
spends beyond its work, launch included); for the roofline, 1 / its compute and memory
efficiencies and its launch overhead. An extrapolated table estimate blends grid points
limited by different resources: it is not always the larger of its parts, and the probes give
only an approximate split (a derived fixed part up to 2.2x the table's), so both rates are
scaled so that the shape's own work costs exactly its estimate. The step's actual work (every
request's own context counted) is then priced with the three, so the launch is paid once per
call whatever the ratio of actual to reference work, and a roofline-priced op over segments of
unlike shapes is priced at its own bound. The rates are memoised per shape (its attributes
exactly: a memo entry is what pricing that shape gives; callers round their shapes, e.g.
`sim.cost.rank_shape`, so that shapes repeat). Ops outside the vocabulary are priced by the
roofline fallback: GQA and linear-attention cores at the profile's attention efficiency (as
MLA cores without a table are), the rest at its GEMM efficiency.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sim.cost.memo import BoundedCache
from sim.cost.op_work import op_work
from sim.cost.rate import ZERO, OpTime, Rate
from sim.cost.roofline import OpEstimator, RooflineCost
from sim.specs.gpu import GpuSpec
from sim.specs.model import MlaSpec
from sim.specs.profile import COMM_OPS, OP_ATTRIBUTES

# attention cores outside the profile vocabulary: priced like attention, not like GEMMs
FALLBACK_ATTENTION_OPS = frozenset({"gqa_decode", "gqa_prefill", "kda"})
Attrs = Mapping[str, object]


RATE_MEMO_ENTRIES = 200_000


def _rate(price: Callable[[float, float], OpTime], compute_s: float, memory_s: float) -> Rate:
    """An estimator's rates at one shape. `price(x, y)` prices x times the reference FLOPs and
    y times its bytes, whose roofline times are `compute_s` and `memory_s`. The fixed part is
    what doubling the work does not double."""
    probe = (1.0, 0.0) if compute_s > 0 else (0.0, 1.0)  # FLOPs alone, or bytes if none
    alone = price(*probe)
    fixed = 2.0 * alone.seconds - price(2 * probe[0], 2 * probe[1]).seconds
    fixed = min(max(fixed, 0.0), alone.seconds)
    compute = (alone.seconds - fixed) / compute_s if compute_s > 0 else 0.0
    memory = 0.0
    if memory_s > 0:
        bytes_alone = price(0.0, 1.0) if compute_s > 0 else alone
        memory = (bytes_alone.seconds - fixed) / memory_s
    if compute_s > 0 and memory_s > 0:
        # an estimate blended from grid points limited by different resources is not the max
        # of its parts: scale both rates so the shape's own work costs what it is priced at
        whole = price(1.0, 1.0).seconds - fixed
        split = max(compute * compute_s, memory * memory_s)
        if whole > 0 and split > 0 and abs(whole - split) > 1e-9 * whole:
            compute, memory = compute * whole / split, memory * whole / split
    return Rate(
        compute_s_per_s=compute,
        memory_s_per_s=memory,
        fixed_s=fixed,
        source=alone.source,
        extrapolated=alone.extrapolated,
    )


@dataclass
class Pricer:
    """Prices ops for one deployment; each shape's rates memoised."""

    gpu: GpuSpec
    estimator: OpEstimator
    mla_spec: MlaSpec | None = None
    fallback: OpEstimator | None = None
    attention_fallback: OpEstimator | None = None  # FALLBACK_ATTENTION_OPS (default: fallback)
    _memo: BoundedCache[tuple[object, ...], Rate] = field(
        default_factory=lambda: BoundedCache(RATE_MEMO_ENTRIES)
    )

    def has_table(self, op: str) -> bool:
        """Whether the estimator holds a measured or published table for `op`."""
        return bool(getattr(self.estimator, "has_table", lambda _: False)(op))

    def op(self, op: str, attrs: Attrs, flops: float, bytes_: float, dtype: str = "bf16") -> OpTime:
        """Seconds of `op` doing `flops`/`bytes_`, at the efficiency its shape `attrs` has."""
        compute_s = flops / self.gpu.peak_flops_per_s(dtype)
        memory_s = bytes_ / self.gpu.hbm_bytes_per_s
        if compute_s <= 0.0 and memory_s <= 0.0:
            return ZERO
        memo_key = (op, dtype, *sorted(attrs.items()))
        hit = self._memo.get(memo_key, lambda: self._rate(op, attrs, flops, bytes_, dtype))
        return hit.time(compute_s, memory_s)

    def _rate(self, op: str, attrs: Attrs, flops: float, bytes_: float, dtype: str) -> Rate:
        estimator = self.estimator
        if op in OP_ATTRIBUTES:
            flops, bytes_ = op_work(op, attrs, mla_spec=self.mla_spec, dtype=dtype)
        else:
            estimator = self.fallback or RooflineCost(self.gpu)
            if op in FALLBACK_ATTENTION_OPS and self.attention_fallback is not None:
                estimator = self.attention_fallback

        def price(x: float, y: float) -> OpTime:
            return estimator.estimate(
                op, key=attrs, point={}, flops=x * flops, bytes_=y * bytes_, dtype=dtype
            )

        g = self.gpu
        return _rate(price, flops / g.peak_flops_per_s(dtype), bytes_ / g.hbm_bytes_per_s)

    def link(self, op: str, attrs: Attrs, bytes_: float, link_bytes_per_s: float) -> OpTime:
        """A collective moving `bytes_` per GPU over a link, at the efficiency its shape has."""
        if bytes_ <= 0.0:
            return ZERO
        ideal = bytes_ / link_bytes_per_s
        memo_key = ("link", op, *sorted(attrs.items()))
        return self._memo.get(memo_key, lambda: self._link_rate(op, attrs, link_bytes_per_s)).time(
            0.0, ideal
        )

    def _link_rate(self, op: str, attrs: Attrs, link_bytes_per_s: float) -> Rate:
        assert op in COMM_OPS, op
        _, ref_bytes = op_work(op, attrs)
        link_fn = getattr(self.estimator, "link_seconds", None)
        if link_fn is None or ref_bytes <= 0:
            return Rate(compute_s_per_s=0.0, memory_s_per_s=1.0, fixed_s=0.0, source="roofline")

        def price(_: float, y: float) -> OpTime:
            return link_fn(  # type: ignore[no-any-return]
                op, key=attrs, point={}, bytes_=y * ref_bytes, link_bytes_per_s=link_bytes_per_s
            )

        return _rate(price, 0.0, ref_bytes / link_bytes_per_s)
