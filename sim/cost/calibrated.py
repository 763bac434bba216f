"""Per-op latency from a calibration profile: interpolate measured latency, carry its work part.

A table is read as t = t_fixed + work / eff. A query takes the table's latency t_c at its
coordinates clamped to the grid (inside: log-latency multilinear in log(axis), so grid points come
back exactly and latency rises along an axis wherever the table's points do), then carries the
part above t_fixed from the table's op to its own compute and memory roofline seconds
(`_carried`): the resource that limits the table's op keeps its efficiency, the other costs at
most what the profile's typical efficiency gives, and the op costs its slower resource. For the
table's own key on its own GPU nothing changes inside the grid. Outside it (marked extrapolated)
t_fixed is held, so latency never falls below it. Along the axes where a query is outside, and
on a GPU other than the table's, each blended grid point is first carried to the query's values
and this GPU, then the points are blended (`_blend_carried`); there the other resource is also
capped by what it reached where it limited smaller points (`table_grid._reached`), so a carried
point is no faster than the points below it. A table whose key differs from the query's
(nearest numeric key, log distance) is also extrapolation. A profile measured on another GPU
keeps t_fixed in seconds: launch and synchronisation do not follow the roofline (FlashMLA's
smallest point is 20.9 us on H800, 25.1 us on H20 with 6.7x less BF16 compute). An op without
any table falls back to the profile's roofline factors ("roofline").

t_fixed, one number per table, is defined in `sim.cost.table_grid`.

Pure and fast: tables are turned into flat arrays once (`table_grid`), table choice is cached
per key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

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


@dataclass(frozen=True, kw_only=True)
class OpEstimate:
    """One op's time and where it came from."""

    seconds: float
    source: str  # "measured" | "published" | "roofline"
    extrapolated: bool
    detail: str


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
        if op not in self._grids:
            r = self.profile.roofline
            e_c = r.compute_efficiency(op)
            seconds = roofline_s(
                flops, bytes_, peak * e_c.value, bandwidth * r.memory_bandwidth_efficiency.value
            )
            if flops > 0 or bytes_ > 0:
                seconds += r.launch_overhead_us.value * 1e-6
            detail = f"{op}: no table; roofline at compute eff {e_c.value:.3g}"
            return OpEstimate(seconds=seconds, source="roofline", extrapolated=False, detail=detail)
        return self._from_table(op, attrs, (flops / peak, bytes_ / bandwidth), dtype, bandwidth)

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
        if op not in self._grids:
            r = self.profile.roofline
            seconds = bytes_ / (link_bytes_per_s * r.comm_link_efficiency.value)
            seconds += r.launch_overhead_us.value * 1e-6 if bytes_ > 0 else 0.0
            detail = f"{op}: no table; link roofline at eff {r.comm_link_efficiency.value:.3g}"
            return OpEstimate(seconds=seconds, source="roofline", extrapolated=False, detail=detail)
        query = (0.0, bytes_ / link_bytes_per_s)
        return self._from_table(op, attrs, query, "bf16", link_bytes_per_s)

    def _from_table(
        self,
        op: str,
        attrs: Mapping[str, object],
        query: tuple[float, float],
        dtype: str,
        bandwidth: float,
    ) -> OpEstimate:
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
        extrapolated = key_dist > 0 or look.clamp > 0 or bool(self._transfer)
        fixed = best.fixed_s
        on = (self.gpu.peak_flops_per_s(best.table.dtype), bandwidth)
        if look.outside or self._transfer:
            t_c = _blend_carried(best, look, on)
        else:  # every blended point is the table's own: carrying would return it unchanged
            t_c = math.exp(look.log_t)
        table_op = best.resource_s({**look.at, **look.outside}, on)
        work = _carried(t_c - fixed, table_op, query, best.typical_eff)
        seconds = fixed + work if max(query) > 0 else 0.0
        eff = max(table_op) / (t_c - fixed) if t_c > fixed else math.inf
        table = best.table
        how = "inside grid" if look.clamp == 0 else "clamped to grid"
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
    ) -> tuple[list[Grid], float]:
        scored = []
        for grid in self._grids[op]:
            dist = sum(_key_distance(attrs[k], v) for k, v in grid.table.key.items())
            dist += 0.0 if grid.table.dtype == dtype or op in COMM_OPS else MISMATCH
            scored.append((dist, grid))
        best = min(d for d, _ in scored)
        return [g for d, g in scored if d == best], best


def _blend_carried(grid: Grid, look: Lookup, on: tuple[float, float]) -> float:
    """Latency of the table's op at the query's coordinates on the GPU whose FLOP/s and
    bytes/s are `on`.

    Each blended grid point is first carried (`_carried`) to the query's values on the axes
    where the query is outside the grid, and to this GPU, then the points are blended as inside
    the grid. Scaling the blend by one roofline ratio instead lets a larger op cost less: along
    an axis where the table's efficiency rises (a kernel filling the GPU as its work grows
    compute-bound), an op whose roofline there stays memory-bound and flat (past another axis's
    edge, or on a GPU with a lower ridge) would get cheaper as it grows. Carried grid points
    rise wherever the table's own points and their work do, and the blend of rising points
    rises."""
    fixed, log_t = grid.fixed_s, 0.0
    for flat, weight in look.corners:
        node = grid.node(flat)
        held = grid.resource_s(node)
        there = grid.resource_s({**node, **look.outside}, on)
        work = math.exp(grid.log_latency[flat]) - fixed
        work = _carried(work, held, there, grid.other_eff[flat])
        log_t += weight * math.log(max(fixed + work, 1e-15))
    return math.exp(log_t)


def _carried(
    work: float,
    held: tuple[float, float],
    query: tuple[float, float],
    other: tuple[float, float],
) -> float:
    """Work seconds of an op whose roofline compute and memory seconds are `query`, from a
    measured `work` seconds at roofline seconds `held` (another shape, or another GPU).

    The resource that limits the measured point keeps the point's efficiency. For the other one
    the point only bounds efficiency from below (the absorbed extend's memory traffic runs at
    0.03-5% of bandwidth at its points, because compute limits them), so it costs the smaller of
    what the point implies and what `other` (the profile's typical efficiency, or less:
    `Grid.other_eff`) gives. The op costs its slower resource. With one ratio for both
    resources instead, an op whose limit differs from the point's (a compute-bound H20 table
    run on an H200, where it is memory-bound) could cost less as it grows. A point without work
    holds its latency."""
    if max(held) <= 0 or work <= 0:
        return max(work, 0.0)
    limit = 0 if held[0] >= held[1] else 1
    held_eff = held[limit] / work
    terms = [0.0]
    for r in (0, 1):
        need = max(query[r], 0.0)
        if r == limit:
            terms.append(need / held_eff)
            continue
        terms.append(need / max(held[r] / work, other[r]))
    return max(terms)


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
