"""One calibration table as flat arrays: its grid, its fixed latency and log-log interpolation.

t_fixed, one number per table, is what its smallest point spends beyond its work: at most what
the profile's roofline factors leave unexplained there, and at most the intercept of the line
t = a + b * work (b >= 0) through the smallest point and its neighbour along each axis whose
work grows; at least one launch (the profile's launch overhead), at most the smallest latency.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from sim.cost.op_work import op_work
from sim.specs.gpu import GpuSpec
from sim.specs.model import MlaSpec
from sim.specs.profile import COMM_OPS, OpTable, RooflineFactors

MISMATCH = 10.0  # key distance of a differing string attribute or dtype (~ a 22000x numeric gap)


@dataclass(frozen=True)
class Grid:
    """A table as flat arrays: log axis values, strides, log latency per grid point, and the
    table's work model: its fixed latency and its roofline at any coordinates."""

    table: OpTable
    axis_names: tuple[str, ...]
    log_axes: tuple[tuple[float, ...], ...]
    strides: tuple[int, ...]
    log_latency: tuple[float, ...]
    mla_spec: MlaSpec | None
    peak: float  # FLOP/s at the table's dtype on the GPU it was measured on
    bandwidth: float  # HBM (comm ops: the table's link) bytes/s on that GPU
    fixed_s: float = 0.0
    # the profile's compute and memory (comm ops: link) efficiencies for this op: what a
    # resource that does not limit the table's points is assumed to reach at least
    typical_eff: tuple[float, float] = (1.0, 1.0)
    # memo of `below`: filled on first use per point (large tables build fast); it only ever
    # holds what `_below_of` computes from the table
    _below: dict[int, tuple[tuple[int, tuple[str, ...]], ...]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def below(self, flat: int) -> tuple[tuple[int, tuple[str, ...]], ...]:
        """The points at or below point `flat` on every axis from which the table rises to it
        (no point between them is faster), each with the axes along which it lies below."""
        if flat not in self._below:
            self._below[flat] = _below_of(self, flat)
        return self._below[flat]

    def work(self, coords: Mapping[str, float]) -> tuple[float, float]:
        """FLOPs and bytes of the table's op at `coords` (its key and dtype, op_work)."""
        attrs = {**self.table.key, **coords}
        return op_work(self.table.op, attrs, mla_spec=self.mla_spec, dtype=self.table.dtype)

    def roofline_s(self, coords: Mapping[str, float]) -> float:
        return max(self.resource_s(coords))

    def resource_s(self, coords: Mapping[str, float]) -> tuple[float, float]:
        """Roofline seconds of compute and of memory (comm ops: link) traffic at `coords`."""
        flops, bytes_ = self.work(coords)
        return flops / self.peak, bytes_ / self.bandwidth

    @property
    def size(self) -> int:
        return len(self.table.points)

    def node(self, flat: int) -> dict[str, float]:
        """Coordinates of grid point `flat` (an index into `log_latency`)."""
        axes = self.table.axes
        return {
            a: axes[a][(flat // stride) % len(axes[a])]
            for a, stride in zip(self.axis_names, self.strides, strict=True)
        }


@dataclass(frozen=True)
class Lookup:
    """Where a query falls on a grid: its log-latency clamped to the grid (multilinear in log
    axes), how far it was clamped (log), the clamped coordinates, the grid points and weights
    that were blended, and the query's own values on the axes it was clamped along."""

    log_t: float
    clamp: float
    at: dict[str, float]
    corners: tuple[tuple[int, float], ...]
    outside: dict[str, float]


def roofline_s(flops: float, bytes_: float, peak: float, bandwidth: float) -> float:
    return max(flops / peak, bytes_ / bandwidth)


def build_grid(
    table: OpTable, gpu: GpuSpec, mla_spec: MlaSpec | None, factors: RooflineFactors
) -> Grid:
    """`table` measured on `gpu` as a Grid, with its fixed latency under `factors`."""
    names = tuple(table.axes)
    sizes = [len(table.axes[a]) for a in names]
    strides = [1] * len(names)
    for i in range(len(names) - 2, -1, -1):
        strides[i] = strides[i + 1] * sizes[i + 1]
    index = [{v: j for j, v in enumerate(table.axes[a])} for a in names]
    log_latency = [0.0] * math.prod(sizes)
    for p in table.points:
        flat = sum(index[i][p.at[a]] * strides[i] for i, a in enumerate(names))
        log_latency[flat] = math.log(p.latency_us_p50 * 1e-6)
    log_axes = tuple(tuple(math.log(v) for v in table.axes[a]) for a in names)
    bandwidth = table.link_bytes_per_s or gpu.hbm_bytes_per_s
    peak = gpu.peak_flops_per_s(table.dtype)
    grid = Grid(
        table, names, log_axes, tuple(strides), tuple(log_latency), mla_spec, peak, bandwidth
    )
    if table.op in COMM_OPS:
        typical = (1.0, factors.comm_link_efficiency.value)
    else:
        typical = (
            factors.compute_efficiency(table.op).value,
            factors.memory_bandwidth_efficiency.value,
        )
    return replace(grid, fixed_s=_fixed_s(grid, factors), typical_eff=typical)


def _below_of(grid: Grid, flat: int) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """`Grid.below(flat)`: a lower point qualifies when the minimum latency over the box from it
    to `flat` is its own (a suffix minimum along every axis, numpy)."""
    names = grid.axis_names
    sizes = tuple(len(grid.table.axes[a]) for a in names)
    high = np.unravel_index(flat, sizes)
    box = np.asarray(grid.log_latency).reshape(sizes)[tuple(slice(0, int(h) + 1) for h in high)]
    low_min = box
    for axis in range(box.ndim):
        low_min = np.flip(np.minimum.accumulate(np.flip(low_min, axis), axis), axis)
    strides = np.asarray(grid.strides)
    return tuple(
        (int(idx @ strides), tuple(a for a, i, h in zip(names, idx, high, strict=True) if i < h))
        for idx in np.argwhere(low_min >= box)
    )


def _fixed_s(grid: Grid, factors: RooflineFactors) -> float:
    """The table's fixed latency (module docstring), from its smallest point and neighbours."""
    table = grid.table
    low = {a: table.axes[a][0] for a in grid.axis_names}
    t0, (flops, bytes_) = math.exp(grid.log_latency[0]), grid.work(low)
    r0 = roofline_s(flops, bytes_, grid.peak, grid.bandwidth)
    if table.op in COMM_OPS:
        typical = bytes_ / (grid.bandwidth * factors.comm_link_efficiency.value)
    else:
        e_c = factors.compute_efficiency(table.op)
        e_m = factors.memory_bandwidth_efficiency
        typical = roofline_s(flops, bytes_, grid.peak * e_c.value, grid.bandwidth * e_m.value)
    fixed = t0 - typical  # what the profile's own efficiencies leave unexplained
    for name, stride in zip(grid.axis_names, grid.strides, strict=True):
        if len(table.axes[name]) > 1:
            t1 = math.exp(grid.log_latency[stride])
            r1 = grid.roofline_s({**low, name: table.axes[name][1]})
            if r1 > r0 * (1 + 1e-9):  # an axis whose work does not grow says nothing here
                fixed = min(fixed, t0 - max(t1 - t0, 0.0) / (r1 - r0) * r0)
    t_min = math.exp(min(grid.log_latency))
    return min(max(fixed, factors.launch_overhead_us.value * 1e-6), t_min)


def is_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def interpolate(grid: Grid, attrs: Mapping[str, object]) -> Lookup:
    """The query's `Lookup` on `grid`."""
    corners: list[tuple[int, float]] = [(0, 1.0)]
    clamp = 0.0
    at: dict[str, float] = {}
    outside: dict[str, float] = {}
    for name, axis, stride in zip(grid.axis_names, grid.log_axes, grid.strides, strict=True):
        value = attrs[name]
        if not is_number(value):
            raise ValueError(f"axis {name!r} needs a number, got {value!r}")
        values = grid.table.axes[name]
        if value <= 0:  # type: ignore[operator]  # off any log grid: hold the lowest point
            clamp += MISMATCH
            at[name] = values[0]
            outside[name] = float(value)  # type: ignore[arg-type]
            continue
        x = math.log(value)  # type: ignore[arg-type]
        if x <= axis[0] or x >= axis[-1]:
            edge = 0 if x <= axis[0] else len(axis) - 1
            clamp += abs(x - axis[edge])
            corners = [(i + edge * stride, w) for i, w in corners]
            at[name] = values[edge]
            if x != axis[edge]:
                outside[name] = float(value)  # type: ignore[arg-type]
            continue
        j = bisect_right(axis, x) - 1
        t = (x - axis[j]) / (axis[j + 1] - axis[j])
        corners = [
            (i + (j + d) * stride, w * (t if d else 1.0 - t)) for i, w in corners for d in (0, 1)
        ]
        at[name] = float(value)  # type: ignore[arg-type]
    log_t = sum(grid.log_latency[i] * w for i, w in corners if w)
    return Lookup(log_t, clamp, at, tuple((i, w) for i, w in corners if w), outside)
