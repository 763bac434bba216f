"""One profile table as a grid: its points as flat arrays of log latency over log axes, a query
clamped onto it, and multilinear interpolation in log latency there (the steps `Grid.clamp` and
`Grid.latency_s` of the rule in `sim.cost.calibrated`)."""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from sim.specs.gpu import GpuSpec
from sim.specs.profile import OpTable

MISMATCH = 10.0  # key distance of a differing text attribute or dtype (~ a 22000x numeric gap)


def is_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


@dataclass(frozen=True)
class Grid:
    """One table as flat arrays: log axis values, strides and log latency per grid point."""

    table: OpTable
    log_axes: tuple[tuple[float, ...], ...]
    strides: tuple[int, ...]
    log_latency: tuple[float, ...]
    peak: float  # FLOP/s at the table's dtype on the GPU it was measured on
    bandwidth: float  # HBM (comm ops: the table's link) bytes/s there
    fixed_s: float  # seconds per call whatever the work (`CalibratedCost._fixed_s`)

    @classmethod
    def of(cls, table: OpTable, gpu: GpuSpec) -> Grid:
        names = list(table.axes)
        sizes = [len(table.axes[a]) for a in names]
        strides = [math.prod(sizes[i + 1 :]) for i in range(len(names))]
        index = [{v: j for j, v in enumerate(table.axes[a])} for a in names]
        log_latency = [0.0] * math.prod(sizes)
        for p in table.points:
            flat = sum(index[i][p.at[a]] * strides[i] for i, a in enumerate(names))
            log_latency[flat] = math.log(p.latency_us_p50 * 1e-6)
        log_axes = tuple(tuple(math.log(v) for v in table.axes[a]) for a in names)
        bandwidth = table.link_bytes_per_s or gpu.hbm_bytes_per_s
        peak = gpu.peak_flops_per_s(table.dtype)
        return cls(table, log_axes, tuple(strides), tuple(log_latency), peak, bandwidth, 0.0)

    def clamp(self, attrs: Mapping[str, object]) -> tuple[dict[str, float], float]:
        """The query's axis values moved onto the grid, and how far (log units; MISMATCH for a
        value <= 0, off any log grid)."""
        at, far = {}, 0.0
        for name, values in self.table.axes.items():
            value = attrs[name]
            if not is_number(value):
                raise ValueError(f"axis {name!r} needs a number, got {value!r}")
            x = float(value)  # type: ignore[arg-type]
            if x <= 0:
                at[name], far = values[0], far + MISMATCH
                continue
            at[name] = min(max(x, values[0]), values[-1])
            far += abs(math.log(x) - math.log(at[name]))
        return at, far

    def latency_s(self, at: Mapping[str, float]) -> float:
        """Latency at on-grid coordinates: multilinear in log-latency over log-axes."""
        axes = zip(self.table.axes, self.log_axes, self.strides, strict=True)
        return interpolate(axes, self.log_latency, at)


def interpolate(
    axes: Iterable[tuple[str, Sequence[float], int]],
    log_values: Sequence[float] | NDArray[np.float64],
    at: Mapping[str, float],
) -> float:
    """Multilinear interpolation in log value over log axes (name, log values, flat stride)."""
    corners: list[tuple[int, float]] = [(0, 1.0)]
    for name, axis, stride in axes:
        if len(axis) == 1:
            continue
        x = math.log(at[name])
        j = min(max(bisect_right(axis, x) - 1, 0), len(axis) - 2)
        w = min(max((x - axis[j]) / (axis[j + 1] - axis[j]), 0.0), 1.0)
        corners = [
            (i + (j + d) * stride, cw * (w if d else 1.0 - w)) for i, cw in corners for d in (0, 1)
        ]
    return math.exp(sum(float(log_values[i]) * w for i, w in corners if w))
