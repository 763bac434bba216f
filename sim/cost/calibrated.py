"""Per-op latency from a calibration profile: interpolate measured latency, carry its work part.

A table is read as t = t_fixed + work / eff. A query on the table's own op, inside its grid, on a
GPU (or link) of the table's speeds, takes the table's latency there (log-latency multilinear
in log(axis), so grid points come back exactly and latency rises along an axis wherever the
table's points do); its work part is only split by resource for the Pricer's probes
(`_carried`). Every other query is extrapolation (marked so): outside the grid, with another key
or dtype (nearest numeric key, log distance), or on a GPU or link of other speeds (a profile
measured on another GPU). t_fixed is held in seconds (launch and synchronisation do not follow
the roofline: FlashMLA's smallest point is 20.9 us on H800, 25.1 us on H20 with 6.7x less BF16
compute), and each grid point's work is carried to the query op at the point's coordinates,
resource by resource, costs the slower one, takes smaller ops below it as a floor, and the
points are blended as inside the grid (`_blend_carried`). The resource limiting a point keeps
its efficiency; the other gets the better of that and the profile's typical one. An op without
any table falls back to the profile's roofline factors ("roofline").

t_fixed, one number per table, is defined in `sim.cost.table_grid`.

Pure and fast: tables are turned into flat arrays once (`table_grid`), table choice is cached
per key.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from sim.cost.op_work import op_work
from sim.cost.rate import OpTime
from sim.cost.table_grid import (
    MISMATCH,
    Grid,
    Lookup,
    build_grid,
    interpolate,
    is_number,
    roofline_s,
)
from sim.specs.gpu import GpuSpec
from sim.specs.model import ModelSpec
from sim.specs.profile import (
    COMM_OPS,
    MLA_SHAPED_OPS,
    OP_ATTRIBUTES,
    Profile,
    check_op,
)

Resources = tuple[float, float]  # roofline seconds of compute and of memory (link) traffic


def _key_distance(a: object, b: object) -> float:
    """0 for equal values, log distance for non-negative numbers, MISMATCH otherwise."""
    if is_number(a) and is_number(b) and float(a) >= 0 and float(b) >= 0:  # type: ignore[arg-type]
        return abs(math.log1p(float(a)) - math.log1p(float(b)))  # type: ignore[arg-type]
    return 0.0 if a == b else MISMATCH


class CalibratedCost:
    """Latency of one op from a profile on a given GPU.

    Construction precomputes every table; `estimate` and `link_seconds` change only a private
    cache of table choices and are safe to call in any order.
    """

    def __init__(self, profile: Profile, gpu: GpuSpec, profile_gpu: GpuSpec | None = None) -> None:
        """`gpu` is the GPU simulated. To run a profile measured on another GPU, pass that one as
        `profile_gpu`: the work part of each table latency is then carried to `gpu`'s roofline
        at the table's efficiencies, the fixed part is kept, and every table estimate is marked
        extrapolated. Without it the tables are taken to be `gpu`'s own.

        Raises ValueError if a table's op cannot be given its work (`sim.cost.op_work`)."""
        self.profile = profile
        self.gpu = gpu
        measured_on = profile_gpu or gpu
        self._transfer = "" if measured_on.name == gpu.name else measured_on.name
        shape = profile.model_shape.mla_spec() if profile.model_shape else None
        self._grids: dict[str, list[Grid]] = {}
        for table in profile.tables:
            grid = build_grid(table, measured_on, shape, profile.roofline)
            self._grids.setdefault(table.op, []).append(grid)
        self._key_names = {
            op: tuple(sorted({k for g in grids for k in g.table.key}))
            for op, grids in self._grids.items()
        }
        self._choice: dict[tuple[object, ...], tuple[list[Grid], float]] = {}

    def has_table(self, op: str) -> bool:
        """Whether the profile holds a table for `op` (else the roofline prices it)."""
        return op in self._grids

    def estimate(
        self,
        op: str,
        *,
        key: Mapping[str, object],
        point: Mapping[str, float],
        flops: float,
        bytes_: float,
        dtype: str = "bf16",
    ) -> OpTime:
        """Seconds of a compute op. `key` and `point` together give every attribute of the op.

        Raises ValueError for a comm op (use `link_seconds`), an unknown op or a wrong attribute.
        """
        if op in COMM_OPS:
            raise ValueError(f"{op} is a communication op: use link_seconds()")
        attrs = _attributes(op, key, point)
        peak, bandwidth = self.gpu.peak_flops_per_s(dtype), self.gpu.hbm_bytes_per_s
        if op not in self._grids:
            r = self.profile.roofline
            e_c = r.compute_efficiency(op)
            seconds = roofline_s(
                flops, bytes_, peak * e_c.value, bandwidth * r.memory_bandwidth_efficiency.value
            )
            if flops > 0 or bytes_ > 0:
                seconds += r.launch_overhead_us.value * 1e-6
            detail = f"{op}: no table; roofline at compute eff {e_c.value:.3g}"
            return OpTime(seconds=seconds, source="roofline", extrapolated=False, detail=detail)
        return self._from_table(op, attrs, (flops / peak, bytes_ / bandwidth), dtype, bandwidth)

    def link_seconds(
        self,
        op: str,
        *,
        key: Mapping[str, object],
        point: Mapping[str, float],
        bytes_: float,
        link_bytes_per_s: float,
    ) -> OpTime:
        """Seconds of a comm op moving `bytes_` (op_work convention) over a link of that speed."""
        if op not in COMM_OPS:
            check_op(op)
            raise ValueError(f"{op} is not a communication op: use estimate()")
        attrs = _attributes(op, key, point)
        if op not in self._grids:
            r = self.profile.roofline
            seconds = bytes_ / (link_bytes_per_s * r.comm_link_efficiency.value)
            seconds += r.launch_overhead_us.value * 1e-6 if bytes_ > 0 else 0.0
            detail = f"{op}: no table; link roofline at eff {r.comm_link_efficiency.value:.3g}"
            return OpTime(seconds=seconds, source="roofline", extrapolated=False, detail=detail)
        query = (0.0, bytes_ / link_bytes_per_s)
        return self._from_table(op, attrs, query, "bf16", link_bytes_per_s)

    def _from_table(
        self,
        op: str,
        attrs: Mapping[str, object],
        query: Resources,
        dtype: str,
        bandwidth: float,
    ) -> OpTime:
        """`query`: the op's roofline seconds of compute and of memory (link) traffic on this
        GPU; `bandwidth`: this GPU's HBM (comm ops: the link's) bytes/s."""
        names = self._key_names[op]
        cache_key = (op, dtype, *(attrs[n] for n in names))
        if cache_key not in self._choice:
            self._choice[cache_key] = self._nearest(op, attrs, dtype)
        grids, key_dist = self._choice[cache_key]
        best, look = grids[0], None
        for grid in grids:
            found = interpolate(grid, attrs)
            if (
                look is None
                or found.clamp < look.clamp
                or (found.clamp == look.clamp and grid.size > best.size)
            ):
                best, look = grid, found
        assert look is not None
        fixed = best.fixed_s
        speeds = (self.gpu.peak_flops_per_s(best.table.dtype), bandwidth)
        as_measured = key_dist == 0 and not look.outside and speeds == (best.peak, best.bandwidth)
        if as_measured:  # the table's own op: only split by resource (the Pricer's probes)
            held = best.resource_s(look.at)
            work = max(_carried(math.exp(look.log_t) - fixed, held, query, best.typical_eff))
        else:
            query_at = _query_work(
                best, attrs, query, dtype, self.gpu.peak_flops_per_s(dtype), bandwidth
            )
            work = _blend_carried(best, look, query_at)
        # a profile from another GPU of the same speeds reads as measured but is still borrowed
        extrapolated = not as_measured or bool(self._transfer)
        seconds = fixed + work if max(query) > 0 else 0.0
        eff = max(query) / work if work > 0 else math.inf
        table = best.table
        how = "inside grid" if look.clamp == 0 else "clamped to grid"
        how += "" if key_dist == 0 else f", nearest key {table.key}"
        how += f", efficiency from {self._transfer}" if self._transfer else ""
        detail = (
            f"{op}[{table.impl}] {how}; fixed {fixed * 1e6:.3g} us + work at eff {eff:.3g}; "
            f"{table.source}"
        )
        return OpTime(
            seconds=seconds, source=self.profile.kind, extrapolated=extrapolated, detail=detail
        )

    def _nearest(
        self, op: str, attrs: Mapping[str, object], dtype: str
    ) -> tuple[list[Grid], float]:
        scored = []
        for grid in self._grids[op]:
            dist = sum(_key_distance(attrs[k], v) for k, v in grid.table.key.items())
            dist += 0.0 if grid.table.dtype == dtype or op in COMM_OPS else MISMATCH
            scored.append((dist, grid))
        best = min(d for d, _ in scored)
        return [g for d, g in scored if d == best], best


def _query_work(
    grid: Grid,
    attrs: Mapping[str, object],
    query: Resources,
    dtype: str,
    peak: float,
    bandwidth: float,
) -> Callable[[Mapping[str, float]], Resources]:
    """The query op's resources at other coordinates of the table's axes (its own key and
    dtype, on this GPU), scaled as the caller scaled its work (the Pricer probes FLOPs and bytes
    apart, and twice over)."""

    def own(coords: Mapping[str, float]) -> Resources:
        flops, bytes_ = op_work(
            grid.table.op, {**attrs, **coords}, mla_spec=grid.mla_spec, dtype=dtype
        )
        return flops / peak, bytes_ / bandwidth

    here = own({})
    scale = tuple(q / h if h > 0 else 0.0 for q, h in zip(query, here, strict=True))
    extra = tuple(q if h <= 0 else 0.0 for q, h in zip(query, here, strict=True))

    def at(coords: Mapping[str, float]) -> Resources:
        c, m = own(coords)
        return c * scale[0] + extra[0], m * scale[1] + extra[1]

    return at


def _blend_carried(
    grid: Grid, look: Lookup, query_at: Callable[[Mapping[str, float]], Resources]
) -> float:
    """Work seconds of the query op from the table's grid points around it, for a query the
    table does not price as measured: outside the grid, with another key or dtype, or on a GPU
    or link of other speeds.

    Each blended point is carried (`_carried`) to the query op at the point's coordinates (the
    query's own values on the axes where it lies outside the grid) and costs its slower
    resource. A point also costs at least what any point at or below it, from which the table
    rises, costs when carried to the query op at its own coordinates: a smaller op, so a floor.
    Where the limiting resource changes between two points the efficiency credited to the
    other one may jump, and without the floor a query limited by that other resource could cost
    less at the larger point (`docs/cost-model.md` gives a measured case). The
    points are then blended as inside the grid (log of fixed part plus work), so the table's own
    op moves across a grid edge without a step. Scaling the table's latency by one roofline
    ratio instead lets a larger op cost less where the table's efficiency rises along an axis
    and the query's limit differs from the table's (past another axis's edge, on a GPU with a
    lower ridge)."""
    fixed = grid.fixed_s
    memo: dict[tuple[int, tuple[float, ...]], float] = {}

    def carried(flat: int, coords: dict[str, float]) -> float:
        key = (flat, tuple(coords[a] for a in grid.axis_names))
        if key not in memo:
            work = math.exp(grid.log_latency[flat]) - fixed
            held = grid.resource_s(grid.node(flat))
            need = query_at(coords)
            # a point that spends only the fixed part says nothing of its work's speed: the
            # query pays the roofline time of the work beyond the point's own (none for a
            # smaller op, so it costs no more than the point)
            done = work > 0 and max(held) > 0
            beyond = max(max(n - h, 0.0) for n, h in zip(need, held, strict=True))
            memo[key] = max(_carried(work, held, need, grid.typical_eff)) if done else beyond
        return memo[key]

    log_t = 0.0
    for flat, weight in look.corners:
        corner = {**grid.node(flat), **look.outside}
        work = carried(flat, corner)
        for low, below in grid.below(flat):
            node = grid.node(low)
            work = max(work, carried(low, {**corner, **{a: node[a] for a in below}}))
        log_t += weight * math.log(fixed + work) if fixed + work > 0 else -math.inf
    return max(math.exp(log_t) - fixed, 0.0)


def _carried(work: float, held: Resources, query: Resources, typical: Resources) -> Resources:
    """Seconds per resource of an op whose roofline resources are `query`, from a measured
    `work` at roofline resources `held` (another shape, another GPU, or the work split by
    resource); the op costs the larger.

    The resource that limits the measured point keeps the point's efficiency. The point only
    bounds the other one's efficiency from below (the absorbed extend's memory traffic runs at
    0.03-5% of bandwidth at its points, because compute limits them): it is credited with the
    best of the limiting resource's efficiency, at most 100% (FlashMLA's decode reaches 61-73% of
    H800's bandwidth from batch 32 and 4K context, and compute-bound about 660 TFLOP/s, 67% of
    peak), its own implied one (so the point itself comes back) and the profile's `typical` one.
    A point without work above the fixed part holds its latency."""
    if max(held) <= 0 or work <= 0:
        return max(work, 0.0), 0.0
    limit = 0 if held[0] >= held[1] else 1
    kept = held[limit] / work
    credited = [
        kept if r == limit else max(typical[r], min(kept, 1.0), held[r] / work) for r in (0, 1)
    ]
    if min(credited) <= 0:  # an efficiency that underflowed to 0 (robust, #25): hold the latency
        return max(work, 0.0), 0.0
    return max(query[0], 0.0) / credited[0], max(query[1], 0.0) / credited[1]


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
