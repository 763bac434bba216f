"""Per-op latency from a calibration profile: interpolate measured latency, scale its work part.

A table is read as t = t_fixed + work / eff. A query takes the table's latency t_c at its
coordinates clamped to the grid (inside: log-latency multilinear in log(axis), so grid points
come back exactly and latency rises along an axis wherever the table's points do), then scales
the part above t_fixed by its own roofline over the table's at the clamped coordinates
(`sim.cost.op_work` in the table's key and dtype, on the GPU it was measured on):
seconds = t_fixed + (t_c - t_fixed) * roofline(query) / roofline(table at clamped point).
For the table's own key on its own GPU the ratio is 1 inside the grid. Outside it (marked
extrapolated) the work part keeps the edge's efficiency and t_fixed is held: latency never
falls below t_fixed, and above the grid, where t_fixed is small, this is close to holding
efficiency. A table whose key differs from the query's (nearest numeric key, log distance) is
also extrapolation. A profile measured on another GPU lends the work part's efficiency to this
GPU's roofline and keeps t_fixed in seconds: launch and synchronisation do not follow the
roofline (FlashMLA's smallest point is 20.9 us on H800, 25.1 us on H20 with 6.7x less BF16
compute). An op without any table falls back to the profile's roofline factors ("roofline").

t_fixed, one number per table, is what its smallest point spends beyond its work: at most what
the profile's roofline factors leave unexplained there, and at most the intercept of the line
t = a + b * work (b >= 0) through the smallest point and its neighbour along each axis whose
work grows; at least one launch (the profile's launch overhead), at most the smallest latency.

Pure and fast: tables are turned into flat arrays once, table choice is cached per key.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, replace

from sim.cost.op_work import op_work
from sim.specs.gpu import GpuSpec
from sim.specs.model import MlaSpec, ModelSpec
from sim.specs.profile import (
    COMM_OPS,
    MLA_SHAPED_OPS,
    OP_ATTRIBUTES,
    OpTable,
    Profile,
    RooflineFactors,
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

    def work(self, coords: Mapping[str, float]) -> tuple[float, float]:
        """FLOPs and bytes of the table's op at `coords` (its key and dtype, op_work)."""
        attrs = {**self.table.key, **coords}
        return op_work(self.table.op, attrs, mla_spec=self.mla_spec, dtype=self.table.dtype)

    def roofline_s(self, coords: Mapping[str, float]) -> float:
        return _roofline_s(*self.work(coords), self.peak, self.bandwidth)

    @property
    def size(self) -> int:
        return len(self.table.points)


def _roofline_s(flops: float, bytes_: float, peak: float, bandwidth: float) -> float:
    return max(flops / peak, bytes_ / bandwidth)


def _build_grid(
    table: OpTable, gpu: GpuSpec, mla_spec: MlaSpec | None, factors: RooflineFactors
) -> _Grid:
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
    grid = _Grid(
        table, names, log_axes, tuple(strides), tuple(log_latency), mla_spec, peak, bandwidth
    )
    return replace(grid, fixed_s=_fixed_s(grid, factors))


def _fixed_s(grid: _Grid, factors: RooflineFactors) -> float:
    """The table's fixed latency (module docstring), from its smallest point and neighbours."""
    table = grid.table
    low = {a: table.axes[a][0] for a in grid.axis_names}
    t0, (flops, bytes_) = math.exp(grid.log_latency[0]), grid.work(low)
    r0 = _roofline_s(flops, bytes_, grid.peak, grid.bandwidth)
    if table.op in COMM_OPS:
        typical = bytes_ / (grid.bandwidth * factors.comm_link_efficiency.value)
    else:
        e_c = factors.compute_efficiency(table.op)
        e_m = factors.memory_bandwidth_efficiency
        typical = _roofline_s(flops, bytes_, grid.peak * e_c.value, grid.bandwidth * e_m.value)
    fixed = t0 - typical  # what the profile's own efficiencies leave unexplained
    for name, stride in zip(grid.axis_names, grid.strides, strict=True):
        if len(table.axes[name]) > 1:
            t1 = math.exp(grid.log_latency[stride])
            r1 = grid.roofline_s({**low, name: table.axes[name][1]})
            if r1 > r0 * (1 + 1e-9):  # an axis whose work does not grow says nothing here
                fixed = min(fixed, t0 - max(t1 - t0, 0.0) / (r1 - r0) * r0)
    t_min = math.exp(min(grid.log_latency))
    return min(max(fixed, factors.launch_overhead_us.value * 1e-6), t_min)


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
        `profile_gpu`: the work part of each table latency then scales `gpu`'s roofline at the
        table's efficiency, the fixed part is kept, and every table estimate is marked
        extrapolated. Without it the tables are taken to be `gpu`'s own.

        Raises ValueError if a table's op cannot be given its work (`sim.cost.op_work`)."""
        self.profile = profile
        self.gpu = gpu
        measured_on = profile_gpu or gpu
        self._transfer = "" if measured_on.name == gpu.name else measured_on.name
        shape = profile.model_shape.mla_spec() if profile.model_shape else None
        self._grids: dict[str, list[_Grid]] = {}
        for table in profile.tables:
            grid = _build_grid(table, measured_on, shape, profile.roofline)
            self._grids.setdefault(table.op, []).append(grid)
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
            e_c = r.compute_efficiency(op)
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
        best, best_clamp = grids[0], math.inf
        best_at: tuple[float, dict[str, float]] = (0.0, {})
        for grid in grids:
            log_t, clamp, at = _interpolate(grid, attrs)
            if clamp < best_clamp or (clamp == best_clamp and grid.size > best.size):
                best, best_clamp, best_at = grid, clamp, (log_t, at)
        extrapolated = key_dist > 0 or best_clamp > 0 or bool(self._transfer)
        t_c, r_c, fixed = math.exp(best_at[0]), best.roofline_s(best_at[1]), best.fixed_s
        scale = t_rl / r_c if r_c > 0 else 1.0  # no work in the table there: hold its latency
        seconds = fixed + (t_c - fixed) * scale if t_rl > 0 else 0.0
        eff = r_c / (t_c - fixed) if t_c > fixed else math.inf
        table = best.table
        how = "inside grid" if best_clamp == 0 else "clamped to grid"
        how += "" if key_dist == 0 else f", nearest key {table.key}"
        how += f", efficiency from {self._transfer}" if self._transfer else ""
        detail = (
            f"{op}[{table.impl}] {how}; fixed {fixed * 1e6:.3g} us + work at eff {eff:.3g}; "
            f"{table.source}"
        )
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


def _interpolate(grid: _Grid, attrs: Mapping[str, object]) -> tuple[float, float, dict[str, float]]:
    """Log-latency at the query clamped to the grid (multilinear in log axes), how far it was
    clamped (log), and the clamped coordinates."""
    corners: list[tuple[int, float]] = [(0, 1.0)]
    clamp = 0.0
    at: dict[str, float] = {}
    for name, axis, stride in zip(grid.axis_names, grid.log_axes, grid.strides, strict=True):
        value = attrs[name]
        if not _is_number(value):
            raise ValueError(f"axis {name!r} needs a number, got {value!r}")
        values = grid.table.axes[name]
        if value <= 0:  # type: ignore[operator]  # off any log grid: hold the lowest point
            clamp += MISMATCH
            at[name] = values[0]
            continue
        x = math.log(value)  # type: ignore[arg-type]
        if x <= axis[0] or x >= axis[-1]:
            edge = 0 if x <= axis[0] else len(axis) - 1
            clamp += abs(x - axis[edge])
            corners = [(i + edge * stride, w) for i, w in corners]
            at[name] = values[edge]
            continue
        j = bisect_right(axis, x) - 1
        t = (x - axis[j]) / (axis[j + 1] - axis[j])
        corners = [
            (i + (j + d) * stride, w * (t if d else 1.0 - t)) for i, w in corners for d in (0, 1)
        ]
        at[name] = float(value)  # type: ignore[arg-type]
    log_t = sum(grid.log_latency[i] * w for i, w in corners if w)
    return log_t, clamp, at


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
