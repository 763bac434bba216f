"""An op's `Rate` from a calibration profile's tables: the one rule of `docs/cost-model.md`
("Where an op's time comes from"). Its steps, in order: `_nearest`, `Grid.clamp`,
`Grid.latency_s`, `_fixed_s`, `_credit`; `_slice_s` off a table point; `_carried` across GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from sim.cost.attention_ops import OP_TYPES
from sim.cost.libm import logs
from sim.cost.memo import BoundedCache
from sim.cost.ops import Op, elem_bytes
from sim.cost.rate import Rate
from sim.cost.table_grid import MISMATCH, Grid, interpolate, is_number
from sim.specs.gpu import GpuSpec
from sim.specs.model import MlaSpec, ModelSpec
from sim.specs.profile import (
    COMM_OPS,
    EP_COMBINE,
    EP_DISPATCH,
    MLA_SHAPED_OPS,
    Profile,
    check_op,
)

Attrs = Mapping[str, object]  # an op's attributes by name
QuerySeconds = Callable[[Attrs], tuple[float, float]]
SLICES = 4096  # slices kept (a slice: at most one table's grid of prices)
# DeepEP's low-latency and normal kernels, over NVLink or RDMA, are different kernels: an
# exchange is read only from a table of its own mode and link (else the roofline prices it)
EP_KERNEL_KEYS = {EP_DISPATCH: ("mode", "link"), EP_COMBINE: ("mode", "link")}


def _key_distance(a: object, b: object) -> float:
    """0 for equal values, log distance for non-negative numbers, MISMATCH otherwise."""
    if is_number(a) and is_number(b) and float(a) >= 0 and float(b) >= 0:  # type: ignore[arg-type]
        return abs(math.log1p(float(a)) - math.log1p(float(b)))  # type: ignore[arg-type]
    return 0.0 if a == b else MISMATCH


class CalibratedCost:
    """Rates of ops from a profile on `gpu`, the GPU simulated; a profile measured on another
    GPU is passed that one as `profile_gpu`, its compute tables carried to `gpu` and every table
    estimate flagged extrapolated. Calls only fill caches, so their order does not matter."""

    def __init__(
        self,
        profile: Profile,
        gpu: GpuSpec,
        profile_gpu: GpuSpec | None = None,
        launch_s: float | None = None,
    ) -> None:
        """`launch_s`: what a kernel without a table pays beyond its work (an engine's kernel
        in a CUDA graph, `sim.cost.overheads`); default the profile's launch figure, which
        stays the floor of every table's fixed part (the tables' kernels were timed so)."""
        self.profile, self.gpu = profile, gpu
        measured_on = profile_gpu or gpu
        self._borrowed = "" if measured_on.name == gpu.name else measured_on.name
        shape = profile.model_shape
        self._mla: MlaSpec | None = shape.mla_spec() if shape else None
        self._launch_s = profile.roofline.launch_overhead_us.value * 1e-6
        self._no_table_launch_s = self._launch_s if launch_s is None else launch_s
        # each table's grid as measured; a borrowed compute table is carried to `gpu` when a
        # query first reads it (`_here`): a run reads a few of a profile's ~170 tables
        self._grids: dict[str, list[Grid]] = {}
        for table in profile.tables:
            grid = Grid.of(table, measured_on)
            self._grids.setdefault(table.op, []).append(replace(grid, fixed_s=self._fixed_s(grid)))
        self._carried_grids: dict[int, Grid] = {}  # by the measured grid's id
        self._choice: dict[tuple[object, ...], tuple[list[Grid], float]] = {}
        self._slices: BoundedCache[tuple[object, ...], NDArray[np.float64]] = BoundedCache(SLICES)

    def has_table(self, op: str) -> bool:
        """Whether the profile holds a table for `op` (else the roofline prices it)."""
        return op in self._grids

    def rate(self, op: Op, dtype: str = "bf16") -> Rate:
        """The rate of a compute op at its shape; ValueError for a comm op (use `link_rate`)."""
        if op.op in COMM_OPS:
            raise ValueError(f"{op.op} is a communication op: use link_rate()")
        peak, bandwidth = self.gpu.peak_flops_per_s(dtype), self.gpu.hbm_bytes_per_s
        return self._rate(op, dtype, peak, bandwidth)

    def link_rate(self, op: Op, link_bytes_per_s: float) -> Rate:
        """The rate of a comm op at its shape over a link of that speed (memory: link traffic)."""
        if op.op not in COMM_OPS:
            check_op(op.op)
            raise ValueError(f"{op.op} is not a communication op: use rate()")
        return self._rate(op, "bf16", math.inf, link_bytes_per_s)

    def _tabled(self, op: Op) -> bool:
        """Whether a table prices `op`: one of its name (and, for an EP exchange, of its
        kernels' mode and link: `EP_KERNEL_KEYS`)."""
        grids = self._grids.get(op.op)
        if not grids:
            return False
        same = EP_KERNEL_KEYS.get(op.op)
        if same is None:
            return True
        attrs = op.attributes()
        return any(all(g.table.key.get(k) == attrs[k] for k in same) for g in grids)

    def _rate(self, op: Op, dtype: str, peak: float, bandwidth: float) -> Rate:
        """`op`'s rate computing in `dtype` at `peak` FLOP/s, moving bytes at `bandwidth`."""
        e_c, e_m = self._typical(op.op)
        if not self._tabled(op):
            return Rate(
                compute_s_per_s=1 / e_c,
                memory_s_per_s=1 / e_m,
                fixed_s=self._no_table_launch_s,
                source="roofline",
                detail=f"{op.op}: no table; roofline at efficiencies {e_c:.3g}, {e_m:.3g}",
            )

        def query_s(attrs: Attrs) -> tuple[float, float]:
            flops, bytes_ = OP_TYPES[op.op].of(attrs).work(self._mla, elem_bytes(dtype))
            return flops / (peak * e_c), bytes_ / (bandwidth * e_m)

        return self._table_rate(op.op, op.attributes(), dtype, query_s, (dtype, bandwidth))

    def _table_rate(
        self, op: str, attrs: Attrs, dtype: str, query_s: QuerySeconds, context: object
    ) -> Rate:
        """The rule; `query_s`: a query's compute and memory (link) seconds at its attributes
        on what runs it (`context`: what else they depend on, the dtype and the link)."""
        grid, key_distance = self._grid(op, attrs, dtype)
        at, far = grid.clamp(attrs)
        table = grid.table
        e_c, e_m = self._typical(op)
        q_s, held = query_s(attrs), self._resources(grid, at, attrs)
        t_c = grid.latency_s(at)
        fixed = grid.fixed_s
        k_c, k_m = _credit(t_c - fixed, held)
        work_s = max(q_s[0] * k_c, q_s[1] * k_m)
        if (key_distance > 0 or far > 0) and work_s > 0:  # q is not c: its slice's price
            scale = (self._slice_s(grid, attrs, query_s, context) - fixed) / work_s
            k_c, k_m = k_c * scale, k_m * scale
        # the table's own op on its own GPU (or link): q's resources are c's, its latency back
        as_measured = key_distance == 0 and far == 0 and q_s == held
        how = "at its grid" if far == 0 else "clamped to its grid"
        how += "" if key_distance == 0 else f", nearest key {table.key}"
        how += f", efficiency from {self._borrowed}" if self._borrowed else ""
        return Rate(
            compute_s_per_s=k_c / e_c,
            memory_s_per_s=k_m / e_m,
            fixed_s=fixed if max(held) > 0 else t_c,
            source=self.profile.kind,
            extrapolated=not as_measured or bool(self._borrowed),
            detail=f"{op}[{table.impl}] {how}; fixed {fixed * 1e6:.3g} us + work, "
            f"{t_c * 1e6:.3g} us there; {table.source}",
        )

    def _grid(self, op: str, attrs: Attrs, dtype: str) -> tuple[Grid, float]:
        """The grid a query of `op` at `attrs` is read from, and its key's distance from it."""
        names = sorted({k for g in self._grids[op] for k in g.table.key})
        cache_key = (op, dtype, *(attrs[n] for n in names))
        if cache_key not in self._choice:
            self._choice[cache_key] = self._nearest(op, attrs, dtype)
        grids, key_distance = self._choice[cache_key]
        # a staircase of grids at one key: the one the query lies nearest (then the larger)
        nearest = min(grids, key=lambda g: (g.clamp(attrs)[1], -len(g.table.points)))
        return self._here(nearest), key_distance

    def _here(self, grid: Grid) -> Grid:
        """`grid` as this GPU runs it: a borrowed compute table carried here (`_carried`, once
        per table: its id then keys its slices), any other as measured."""
        if not self._borrowed or grid.table.op in COMM_OPS:
            return grid
        carried = self._carried_grids.get(id(grid))
        if carried is None:
            carried = self._carried_grids[id(grid)] = self._carried(grid)
        return carried

    def axis_values(self, op: Op, axis: str, dtype: str = "bf16") -> tuple[float, ...]:
        """The values along `axis` of the table `op` is read from (one for a key attribute;
        none where the profile holds no table for it)."""
        if not self._tabled(op):
            return ()
        table = self._grid(op.op, op.attributes(), dtype)[0].table
        if axis in table.axes:
            return tuple(table.axes[axis])
        return (float(table.key[axis]),) if axis in table.key else ()  # type: ignore[arg-type]

    def _slice_s(self, grid: Grid, attrs: Attrs, query_s: QuerySeconds, context: object) -> float:
        """q's price read off its slice of the grid (the nodes at its clamped coordinates,
        `_slice`), log-log at q."""
        axes = grid.table.axes
        inside = [a for a, v in axes.items() if len(v) > 1 and v[0] <= float(attrs[a]) <= v[-1]]  # type: ignore[arg-type]
        held_attrs = tuple((n, v) for n, v in attrs.items() if n not in inside)
        key = (id(grid), context, held_attrs)
        log_prices = self._slices.get(key, lambda: self._slice(grid, attrs, inside, query_s))
        sizes = [len(axes[a]) for a in inside]
        strides = [math.prod(sizes[i + 1 :]) for i in range(len(inside))]
        log_axes = [grid.log_axes[list(axes).index(a)] for a in inside]
        at = {a: float(attrs[a]) for a in inside}  # type: ignore[arg-type]
        return interpolate(zip(inside, log_axes, strides, strict=True), log_prices, at)

    def _slice(
        self, grid: Grid, attrs: Attrs, inside: list[str], query_s: QuerySeconds
    ) -> NDArray[np.float64]:
        """Log prices of q moved onto each node of its slice, made non-decreasing along every
        in-grid axis wherever the table's own points rise (a running maximum)."""
        axes, names = grid.table.axes, list(grid.table.axes)
        edge = grid.clamp(attrs)[0]
        shape = [len(axes[a]) if a in inside else 1 for a in names]
        prices, measured = np.empty(shape), np.empty(shape)
        for idx in np.ndindex(*shape):
            moved = {a: axes[a][j] for a, j in zip(names, idx, strict=True) if a in inside}
            node = {**edge, **moved}
            flat = sum(axes[a].index(node[a]) * s for a, s in zip(names, grid.strides, strict=True))
            measured[idx] = latency = math.exp(grid.log_latency[flat])
            k = _credit(latency - grid.fixed_s, self._resources(grid, node, attrs))
            q = query_s({**attrs, **moved})
            prices[idx] = grid.fixed_s + max(q[0] * k[0], q[1] * k[1])
        for axis in range(prices.ndim):  # carried up each step where the table itself rises
            p, m = np.moveaxis(prices, axis, 0), np.moveaxis(measured, axis, 0)
            for j in range(1, p.shape[0]):
                p[j] = np.where(m[j] >= m[j - 1], np.maximum(p[j], p[j - 1]), p[j])
        return logs(prices.ravel())

    def _resources(self, grid: Grid, at: Mapping[str, float], attrs: Attrs) -> tuple[float, float]:
        """r of the table's op at on-grid `at` (the rest of its attributes from `attrs`) on the
        GPU it was measured on, at the profile's efficiencies."""
        return self._over(grid, *self._work_at(grid, at, attrs))

    def _work_at(self, grid: Grid, at: Mapping[str, float], attrs: Attrs) -> tuple[float, float]:
        """FLOPs and bytes of the table's op at on-grid `at` (the rest from `attrs`)."""
        table = grid.table
        c = OP_TYPES[table.op].of({**attrs, **table.key, **at})
        return c.work(self._mla, elem_bytes(table.dtype))

    def _over(self, grid: Grid, flops: float, bytes_: float) -> tuple[float, float]:
        """r of that work on `grid`'s GPU, at the profile's efficiencies."""
        e_c, e_m = self._typical(grid.table.op)
        return flops / (grid.peak * e_c), bytes_ / (grid.bandwidth * e_m)

    def _fixed_s(self, grid: Grid) -> float:
        """The table's fixed part: at most what its lowest point spends beyond its r, and at
        most the intercept at r = 0 of the line through that point and the next along each
        axis whose r grows; at least one launch, at most the table's smallest latency."""
        axes = grid.table.axes
        low = {a: v[0] for a, v in axes.items()}
        t0, r0 = math.exp(grid.log_latency[0]), max(self._resources(grid, low, {}))
        fixed = t0 - r0
        for (name, values), stride in zip(axes.items(), grid.strides, strict=True):
            if len(values) > 1:
                t1 = math.exp(grid.log_latency[stride])
                r1 = max(self._resources(grid, {**low, name: values[1]}, {}))
                if r1 > r0 * (1 + 1e-9):
                    fixed = min(fixed, t0 - max(t1 - t0, 0.0) * r0 / (r1 - r0))
        return min(max(fixed, self._launch_s), math.exp(min(grid.log_latency)))

    def _carried(self, grid: Grid) -> Grid:
        """The table carried to this GPU point by point (each point's work part times its r
        here over its r there), made non-decreasing along every axis (a running maximum)."""
        peak = self.gpu.peak_flops_per_s(grid.table.dtype)
        here = replace(grid, peak=peak, bandwidth=self.gpu.hbm_bytes_per_s)
        axes = grid.table.axes
        sizes = [len(v) for v in axes.values()]
        work = np.empty(len(grid.log_latency))
        for flat, idx in enumerate(np.ndindex(*sizes)):  # row-major, as `Grid.strides`
            at = {a: v[j] for (a, v), j in zip(axes.items(), idx, strict=True)}
            done = self._work_at(grid, at, {})  # the same work on either GPU: counted once
            k = _credit(math.exp(grid.log_latency[flat]) - grid.fixed_s, self._over(grid, *done))
            work[flat] = max(r * f for r, f in zip(self._over(here, *done), k, strict=True))
        shaped = work.reshape(sizes)
        for axis in range(shaped.ndim):
            shaped = np.maximum.accumulate(shaped, axis=axis)
        carried = tuple(logs(grid.fixed_s + shaped.ravel()).tolist())
        return replace(here, log_latency=carried)

    def _typical(self, op: str) -> tuple[float, float]:
        """The profile's compute and memory (comm ops: link) efficiencies for `op`."""
        r = self.profile.roofline
        if op in COMM_OPS:  # no compute
            return math.inf, r.comm_link_efficiency.value
        return r.compute_efficiency(op).value, r.memory_bandwidth_efficiency.value

    def _nearest(self, op: str, attrs: Attrs, dtype: str) -> tuple[list[Grid], float]:
        """The tables nearest the query's key and dtype, and their key distance."""
        scored = []
        for grid in self._grids[op]:
            dist = sum(_key_distance(attrs[k], v) for k, v in grid.table.key.items())
            dist += 0.0 if grid.table.dtype == dtype or op in COMM_OPS else MISMATCH
            scored.append((dist, grid))
        best = min(d for d, _ in scored)
        return [g for d, g in scored if d == best], best


def _credit(work_s: float, held: tuple[float, float]) -> tuple[float, float]:
    """Seconds per second of compute and of memory (link) traffic at the profile's efficiencies,
    for an op whose work part at c is `work_s` and whose resources there are `held`."""
    if work_s <= 0 or max(held) <= 0:
        return 0.0, 0.0
    limit = 0 if held[0] >= held[1] else 1
    lim, other = held[limit], held[1 - limit]
    e_lim = lim / work_s
    e_other = max(other / work_s, min(1.0, e_lim * lim / other)) if other > 0 else 1.0
    k = (1.0 / e_lim, 1.0 / e_other)
    return k if limit == 0 else (k[1], k[0])


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
