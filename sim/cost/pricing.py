"""Turning an op into seconds: its `Rate` at its shape applied to the work it (or the op it
`runs`) counts (`docs/cost-model.md`). Memoised, each memo a pure function of its key: rates per
shape (or per op name where the estimator answers every shape alike), and the time of an op
whose work its fields alone set (`BY_SHAPE`) per whole shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.cost.calibrated import CalibratedCost
from sim.cost.memo import BoundedCache
from sim.cost.ops import Bmm, Elementwise, ElementwiseKernel, Gemm, Op, elem_bytes
from sim.cost.rate import ZERO, OpTime, Rate
from sim.cost.roofline import OpEstimator, RooflineCost
from sim.specs.gpu import GpuSpec
from sim.specs.model import MlaSpec
from sim.specs.profile import COMM_OPS, OP_ATTRIBUTES

# attention cores outside the profile vocabulary: priced like attention, not like GEMMs
FALLBACK_ATTENTION_OPS = frozenset({"gqa_decode", "gqa_prefill", "kda"})
RATE_MEMO_ENTRIES, TIME_MEMO_ENTRIES = 200_000, 100_000
# ops whose work is a function of their fields alone (a GEMM's `weight_excess` is in the key)
BY_SHAPE: frozenset[type[Op]] = frozenset({Gemm, Bmm, Elementwise, ElementwiseKernel})
LINK_ROOFLINE = Rate(compute_s_per_s=0.0, memory_s_per_s=1.0, fixed_s=0.0, source="roofline")


@dataclass
class Pricer:
    """Prices ops for one deployment (`mla`: the model's MLA shape, for attention work). Ops
    outside the vocabulary go to `fallback`, the GQA and KDA cores to `attention_fallback`
    (default: `fallback`), at the profile's attention efficiency as MLA cores without a table."""

    gpu: GpuSpec
    estimator: OpEstimator
    fallback: OpEstimator | None = None
    attention_fallback: OpEstimator | None = None
    mla: MlaSpec | None = None
    _rates: BoundedCache[tuple[object, ...], Rate] = field(
        default_factory=lambda: BoundedCache(RATE_MEMO_ENTRIES)
    )
    _times: BoundedCache[tuple[object, ...], OpTime] = field(
        default_factory=lambda: BoundedCache(TIME_MEMO_ENTRIES)
    )
    # per op name and dtype: its rate where it is the same at every shape (else None)
    _shape_free: dict[tuple[str, str], Rate | None] = field(default_factory=dict)
    # per op name: whether the estimator holds a table for it (asked a few times a step)
    _tables: dict[str, bool] = field(default_factory=dict)
    # pieces callers price through this pricer, each a pure function of its key for it (a
    # memory-bound kernel's time in a step, `sim.cost.elementwise.price`)
    pieces: BoundedCache[object, OpTime] = field(
        default_factory=lambda: BoundedCache(TIME_MEMO_ENTRIES)
    )

    def has_table(self, op: str) -> bool:
        """Whether the estimator holds a measured or published table for `op`."""
        known = self._tables.get(op)
        if known is None:
            ask = getattr(self.estimator, "has_table", None)
            known = self._tables[op] = bool(ask(op)) if ask is not None else False
        return known

    def table_axis(self, op: Op, axis: str) -> tuple[float, ...]:
        """The values along `axis` of the measured or published table `op` is read from (none
        where the estimator holds no table for it)."""
        ask = getattr(self.estimator, "axis_values", None)
        return tuple(ask(op, axis)) if ask is not None else ()

    def rate(self, op: Op, dtype: str = "bf16") -> Rate:
        """The op's rate at its shape (computing in `dtype`), memoised."""
        key = (op.op, dtype)
        if key not in self._shape_free:
            est = self._estimator(op)
            alike = isinstance(est, RooflineCost) or (
                isinstance(est, CalibratedCost) and not est.has_table(op.op)
            )
            self._shape_free[key] = self._rate(op, dtype) if alike else None
        free = self._shape_free[key]
        return self._rate(op, dtype) if free is None else free

    def shape_free(self, op: Op, dtype: str = "bf16") -> Rate | None:
        """`op`'s rate where the estimator prices every shape of its name alike (a roofline,
        or a profile without its table), else None: work of many shapes can then be priced
        at once, as arrays."""
        self.rate(op, dtype)  # decides it for the op's name and dtype
        return self._shape_free[(op.op, dtype)]

    def price(self, op: Op, dtype: str = "bf16", *, runs: Op | None = None) -> OpTime:
        """Seconds of `op`'s work (or of `runs`', the op a step runs where it reads other than
        the shape its table is read at: the experts actually touched) at `op`'s rate."""
        if runs is None and type(op) in BY_SHAPE:
            key = (op, dtype, getattr(op, "weight_excess", 0.0))
            return self._times.get(key, lambda: self._price(op, dtype, op))
        return self._price(op, dtype, runs or op)

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

        return self._rates.get(("link", op, link_bytes_per_s), rate).time(
            0.0, bytes_ / link_bytes_per_s
        )

    def _price(self, op: Op, dtype: str, runs: Op) -> OpTime:
        flops, bytes_ = runs.work(self.mla, elem_bytes(dtype))
        compute_s = flops / self.gpu.peak_flops_per_s(dtype)
        memory_s = bytes_ / self.gpu.hbm_bytes_per_s
        if compute_s <= 0.0 and memory_s <= 0.0:
            return ZERO
        return self.rate(op, dtype).time(compute_s, memory_s)

    def _rate(self, op: Op, dtype: str) -> Rate:
        return self._rates.get((op, dtype), lambda: self._estimator(op).rate(op, dtype))

    def _estimator(self, op: Op) -> OpEstimator:
        if op.op in OP_ATTRIBUTES:
            return self.estimator
        if op.op in FALLBACK_ATTENTION_OPS and self.attention_fallback is not None:
            return self.attention_fallback
        return self.fallback or RooflineCost(self.gpu)
