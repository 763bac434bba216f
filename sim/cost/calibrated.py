"""Per-op latency from a calibration profile: interpolate measured efficiency, scale by roofline.

For a table point, efficiency = roofline(point) / latency(point), with roofline
t = max(flops / peak(dtype), bytes / HBM bandwidth) (comm ops: bytes / link bandwidth). A query
interpolates efficiency multilinearly in log(axis) space inside the grid, so grid points come
back exactly; outside, each axis is clamped to the grid (the nearest measured efficiency is held)
and the query's own roofline sets the scale: the estimate is then marked extrapolated. A table
whose key differs from the query's (nearest numeric key, log distance) is also extrapolation.
An op without any table falls back to the profile's roofline factors (source "roofline").

Pure and fast: tables are turned into flat arrays once, table choice is cached per key.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass

from sim.specs.gpu import GpuSpec
from sim.specs.model import ModelSpec
from sim.specs.profile import (
    ATTENTION_OPS,
    COMM_OPS,
    MLA_SHAPED_OPS,
    OP_ATTRIBUTES,
    OpTable,
    Profile,
    check_op,
)

MISMATCH = 10.0  # key distance of a differing string attribute or dtype (~ a 22000x numeric gap)


@dataclass(frozen=True, kw_only=True)
class OpEstimate:
    """One op's time and where it came from."""

    seconds: float
    source: str  # "measured" | "published" | "roofline"
    extrapolated: bool
    detail: str


@dataclass(frozen=True)
class _Grid:
    """A table as flat arrays: log axis values, strides and efficiency per grid point."""

    table: OpTable
    axis_names: tuple[str, ...]
    log_axes: tuple[tuple[float, ...], ...]
    strides: tuple[int, ...]
    eff: tuple[float, ...]
    size: int


def _roofline_s(flops: float, bytes_: float, peak: float, bandwidth: float) -> float:
    return max(flops / peak, bytes_ / bandwidth)


def _build_grid(table: OpTable, gpu: GpuSpec) -> _Grid:
    names = tuple(table.axes)
    sizes = [len(table.axes[a]) for a in names]
    strides = [1] * len(names)
    for i in range(len(names) - 2, -1, -1):
        strides[i] = strides[i + 1] * sizes[i + 1]
    index = [{v: j for j, v in enumerate(table.axes[a])} for a in names]
    eff = [0.0] * math.prod(sizes)
    peak, bandwidth = gpu.peak_flops_per_s(table.dtype), gpu.hbm_bytes_per_s
    if table.link_bytes_per_s is not None:
        bandwidth = table.link_bytes_per_s
    for p in table.points:
        flat = sum(index[i][p.at[a]] * strides[i] for i, a in enumerate(names))
        eff[flat] = _roofline_s(p.flops, p.hbm_bytes, peak, bandwidth) / (p.latency_us_p50 * 1e-6)
    log_axes = tuple(tuple(math.log(v) for v in table.axes[a]) for a in names)
    return _Grid(table, names, log_axes, tuple(strides), tuple(eff), len(table.points))


def _is_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _key_distance(a: object, b: object) -> float:
    """0 for equal values, log distance for non-negative numbers, MISMATCH otherwise."""
    if _is_number(a) and _is_number(b) and float(a) >= 0 and float(b) >= 0:  # type: ignore[arg-type]
        return abs(math.log1p(float(a)) - math.log1p(float(b)))  # type: ignore[arg-type]
    return 0.0 if a == b else MISMATCH


class CalibratedCost:
    """Latency of one op from a profile on a given GPU.

    Construction precomputes every table; `estimate` and `link_seconds` change only a private
    cache of table choices and are safe to call in any order.
    """

    def __init__(self, profile: Profile, gpu: GpuSpec, profile_gpu: GpuSpec | None = None) -> None:
        """`gpu` is the GPU simulated. To run a profile measured on another GPU, pass that one as
        `profile_gpu`: its efficiencies then scale `gpu`'s roofline, and every table estimate is
        marked extrapolated. Without it the tables are taken to be `gpu`'s own."""
        self.profile = profile
        self.gpu = gpu
        measured_on = profile_gpu or gpu
        self._transfer = "" if measured_on.name == gpu.name else measured_on.name
        self._grids: dict[str, list[_Grid]] = {}
        for table in profile.tables:
            self._grids.setdefault(table.op, []).append(_build_grid(table, measured_on))
        self._key_names = {
            op: tuple(sorted({k for g in grids for k in g.table.key}))
            for op, grids in self._grids.items()
        }
        self._choice: dict[tuple[object, ...], tuple[list[_Grid], float]] = {}

    def estimate(
        self,
        op: str,
        *,
        key: Mapping[str, object],
        point: Mapping[str, float],
        flops: float,
        bytes_: float,
        dtype: str = "bf16",
    ) -> OpEstimate:
        """Seconds of a compute op. `key` and `point` together give every attribute of the op.

        Raises ValueError for a comm op (use `link_seconds`), an unknown op or a wrong attribute.
        """
        if op in COMM_OPS:
            raise ValueError(f"{op} is a communication op: use link_seconds()")
        attrs = _attributes(op, key, point)
        peak, bandwidth = self.gpu.peak_flops_per_s(dtype), self.gpu.hbm_bytes_per_s
        t_rl = _roofline_s(flops, bytes_, peak, bandwidth)
        if op not in self._grids:
            r = self.profile.roofline
            e_c = (
                r.attention_compute_efficiency if op in ATTENTION_OPS else r.gemm_compute_efficiency
            )
            seconds = _roofline_s(
                flops, bytes_, peak * e_c.value, bandwidth * r.memory_bandwidth_efficiency.value
            )
            if flops > 0 or bytes_ > 0:
                seconds += r.launch_overhead_us.value * 1e-6
            detail = f"{op}: no table; roofline at compute eff {e_c.value:.3g}"
            return OpEstimate(seconds=seconds, source="roofline", extrapolated=False, detail=detail)
        return self._from_table(op, attrs, t_rl, dtype)

    def link_seconds(
        self,
        op: str,
        *,
        key: Mapping[str, object],
        point: Mapping[str, float],
        bytes_: float,
        link_bytes_per_s: float,
    ) -> OpEstimate:
        """Seconds of a comm op moving `bytes_` (op_work convention) over a link of that speed."""
        if op not in COMM_OPS:
            check_op(op)
            raise ValueError(f"{op} is not a communication op: use estimate()")
        attrs = _attributes(op, key, point)
        t_rl = bytes_ / link_bytes_per_s
        if op not in self._grids:
            r = self.profile.roofline
            seconds = bytes_ / (link_bytes_per_s * r.comm_link_efficiency.value)
            seconds += r.launch_overhead_us.value * 1e-6 if bytes_ > 0 else 0.0
            detail = f"{op}: no table; link roofline at eff {r.comm_link_efficiency.value:.3g}"
            return OpEstimate(seconds=seconds, source="roofline", extrapolated=False, detail=detail)
        return self._from_table(op, attrs, t_rl, "bf16")

    def _from_table(
        self, op: str, attrs: Mapping[str, object], t_rl: float, dtype: str
    ) -> OpEstimate:
        names = self._key_names[op]
        cache_key = (op, dtype, *(attrs[n] for n in names))
        if cache_key not in self._choice:
            self._choice[cache_key] = self._nearest(op, attrs, dtype)
        grids, key_dist = self._choice[cache_key]
        best, best_clamp, best_eff = grids[0], math.inf, 0.0
        for grid in grids:
            eff, clamp = _interpolate(grid, attrs)
            if clamp < best_clamp or (clamp == best_clamp and grid.size > best.size):
                best, best_clamp, best_eff = grid, clamp, eff
        extrapolated = key_dist > 0 or best_clamp > 0 or bool(self._transfer)
        table = best.table
        how = "inside grid" if best_clamp == 0 else "clamped to grid"
        how += "" if key_dist == 0 else f", nearest key {table.key}"
        how += f", efficiency from {self._transfer}" if self._transfer else ""
        detail = f"{op}[{table.impl}] {how}; eff {best_eff:.3g}; {table.source}"
        seconds = t_rl / best_eff if t_rl > 0 else 0.0
        return OpEstimate(
            seconds=seconds, source=self.profile.kind, extrapolated=extrapolated, detail=detail
        )

    def _nearest(
        self, op: str, attrs: Mapping[str, object], dtype: str
    ) -> tuple[list[_Grid], float]:
        scored = []
        for grid in self._grids[op]:
            dist = sum(_key_distance(attrs[k], v) for k, v in grid.table.key.items())
            dist += 0.0 if grid.table.dtype == dtype or op in COMM_OPS else MISMATCH
            scored.append((dist, grid))
        best = min(d for d, _ in scored)
        return [g for d, g in scored if d == best], best


def _attributes(
    op: str, key: Mapping[str, object], point: Mapping[str, float]
) -> dict[str, object]:
    """key and point merged; ValueError unless they give each attribute of the op once."""
    check_op(op)
    attrs = {**key, **point}
    if len(attrs) != len(key) + len(point) or set(attrs) != set(OP_ATTRIBUTES[op]):
        raise ValueError(
            f"{op} is described by {', '.join(OP_ATTRIBUTES[op])} (each once, in key or "
            f"point); got key {sorted(key)} and point {sorted(point)}"
        )
    return attrs


def _interpolate(grid: _Grid, attrs: Mapping[str, object]) -> tuple[float, float]:
    """Efficiency at the query (multilinear in log space) and how far it was clamped (log)."""
    corners: list[tuple[int, float]] = [(0, 1.0)]
    clamp = 0.0
    for name, axis, stride in zip(grid.axis_names, grid.log_axes, grid.strides, strict=True):
        value = attrs[name]
        if not _is_number(value):
            raise ValueError(f"axis {name!r} needs a number, got {value!r}")
        if value <= 0:  # type: ignore[operator]  # off any log grid: hold the lowest point
            clamp += MISMATCH
            continue
        x = math.log(value)  # type: ignore[arg-type]
        if x <= axis[0] or x >= axis[-1]:
            edge = 0 if x <= axis[0] else len(axis) - 1
            clamp += abs(x - axis[edge])
            corners = [(i + edge * stride, w) for i, w in corners]
            continue
        j = bisect_right(axis, x) - 1
        t = (x - axis[j]) / (axis[j + 1] - axis[j])
        corners = [
            (i + (j + d) * stride, w * (t if d else 1.0 - t)) for i, w in corners for d in (0, 1)
        ]
    eff = sum(grid.eff[i] * w for i, w in corners if w)
    return eff, clamp


def check_model(profile: Profile, model: ModelSpec) -> None:
    """Raise ValueError if the profile's attention tables were measured for another MLA shape.

    Head counts may differ (attention TP splits heads; tables record their own); the latent width
    and the per-head widths must match. A profile without attention tables fits any model.
    """
    shape = profile.model_shape
    if shape is None or model.attention != "mla":
        return
    if not any(t.op in MLA_SHAPED_OPS for t in profile.tables):
        return
    m = model.mla_spec
    fields = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
    diffs = [f"{f} {getattr(shape, f)} vs {getattr(m, f)}" for f in fields]
    diffs = [d for f, d in zip(fields, diffs, strict=True) if getattr(shape, f) != getattr(m, f)]
    if diffs:
        raise ValueError(
            f"profile {profile.name!r} was measured for the MLA shape of {shape.model!r}, not "
            f"{model.name!r} ({'; '.join(diffs)}): calibrate for this model with "
            f"`python -m kernels_calib --model {model.name}` or use a roofline profile"
        )
