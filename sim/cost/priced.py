"""A `Pricer` that also memoises the time of the ops a step prices most, by their whole shape.

A rank's GEMMs, absorbed bmms and memory-bound kernels are set by a few numbers each (tokens,
widths; a GEMM's weight bytes beyond its dtype), and the same ones come back in every part of a
rank that is priced for the first time (its projections in each layer and MTP pass, its
kernels per pass). `Pricer.price` is a pure function of the op's fields and dtype, so a hit
returns exactly what pricing the op again would; attention ops, which sum over their requests'
segments, and ops priced at another op's work (`runs`) are priced as before.

Rates are memoised by the op alone where the estimator answers every shape of the op alike
(the roofline, or a profile without a table for it: `CalibratedCost`'s roofline factors), so
an op at a new shape does not read the same rate again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.cost.calibrated import CalibratedCost
from sim.cost.memo import BoundedCache
from sim.cost.ops import Bmm, Elementwise, ElementwiseKernel, Gemm, Op
from sim.cost.pricing import Pricer
from sim.cost.rate import OpTime, Rate
from sim.cost.roofline import RooflineCost

TIME_MEMO_ENTRIES = 100_000
# ops whose work is a function of their fields alone (a GEMM's `weight_excess` is in the key)
BY_SHAPE: frozenset[type[Op]] = frozenset({Gemm, Bmm, Elementwise, ElementwiseKernel})


@dataclass
class MemoPricer(Pricer):
    """`Pricer`, with `price` of the `BY_SHAPE` ops memoised by their fields and dtype."""

    _times: BoundedCache[tuple[object, ...], OpTime] = field(
        default_factory=lambda: BoundedCache(TIME_MEMO_ENTRIES)
    )
    # per op name: its rate where it is the same at every shape (else None: read per shape)
    _shape_free: dict[tuple[str, str], Rate | None] = field(default_factory=dict)

    def rate(self, op: Op, dtype: str = "bf16") -> Rate:
        key = (op.op, dtype)
        try:
            free = self._shape_free[key]
        except KeyError:
            est = self._estimator(op)
            same = isinstance(est, RooflineCost) or (
                isinstance(est, CalibratedCost) and not est.has_table(op.op)
            )
            free = self._shape_free[key] = super().rate(op, dtype) if same else None
        return super().rate(op, dtype) if free is None else free

    def price(self, op: Op, dtype: str = "bf16", *, runs: Op | None = None) -> OpTime:
        if runs is not None or type(op) not in BY_SHAPE:
            return super().price(op, dtype, runs=runs)
        key = (op, dtype, getattr(op, "weight_excess", 0.0))
        return self._times.get(key, lambda: Pricer.price(self, op, dtype))
