"""Turn scattered measurements into op tables, each a full rectilinear grid.

Published benchmarks are often staircases (large batches stop at shorter contexts). A staircase
is covered by its maximal full rectangles, which overlap on shared points; the cost model picks
the one containing a query, and overlapping tables agree there because they share grid values.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from sim.cost.attention_ops import op_at
from sim.cost.ops import elem_bytes
from sim.specs.model import MlaSpec
from sim.specs.profile import KeyValue, OpPoint, OpTable

Coords = tuple[float, ...]


def full_grids(coords: Sequence[Coords]) -> list[list[Coords]]:
    """Cover distinct 1-D or 2-D points by full grids; every point lands in at least one.

    2-D: for each distinct set S of second-axis values seen with some first-axis value, the grid
    is {a : S is within a's values} x S; grids inside another grid are dropped.
    """
    points = sorted(set(coords))
    if not points:
        return []
    dims = len(points[0])
    if dims == 1:
        return [points]
    if dims != 2:
        raise ValueError(f"full_grids handles 1 or 2 axes, got {dims}")
    seconds: dict[float, frozenset[float]] = {}
    for a, b in points:
        seconds[a] = seconds.get(a, frozenset()) | {b}
    rects = []
    for s in sorted(set(seconds.values()), key=lambda x: (-len(x), sorted(x))):
        firsts = frozenset(a for a, bs in seconds.items() if s <= bs)
        rects.append((firsts, s))
    maximal = [r for r in rects if not any(o != r and r[0] <= o[0] and r[1] <= o[1] for o in rects)]
    grids: list[list[Coords]] = [
        sorted(itertools.product(sorted(a), sorted(b))) for a, b in maximal
    ]
    covered = {p for g in grids for p in g}
    assert covered == set(points), "every point must land in a grid"
    return grids


def dedupe(
    rows: Sequence[tuple[Coords, float]], what: str, notes: list[str]
) -> dict[Coords, float]:
    """Coordinates -> latency; identical repeats merged (and noted), conflicting ones refused."""
    out: dict[Coords, float] = {}
    repeats = 0
    for at, latency in rows:
        if at in out:
            if out[at] != latency:
                raise ValueError(
                    f"{what}: point {at} appears with latencies {out[at]} and {latency}"
                )
            repeats += 1
        out[at] = latency
    if repeats:
        notes.append(f"{what}: {repeats} rows repeat an identical earlier row; kept once")
    return out


def make_tables(
    *,
    op: str,
    key: Mapping[str, KeyValue],
    axis_names: Sequence[str],
    rows: Sequence[tuple[Coords, float]],
    dtype: str,
    impl: str,
    source: str,
    notes: list[str],
    mla_spec: MlaSpec | None = None,
    spreads: Mapping[Coords, tuple[float, float]] | None = None,
    link_bytes_per_s: float | None = None,
) -> list[OpTable]:
    """Op tables from (coordinates, median latency us) rows, split into full grids.

    `spreads` gives (p10, p90) per point when measured. FLOPs and bytes are
    the op type's (`attention_ops.op_at`).
    """
    what = f"{op} {dict(key)} ({source})"
    latency = dedupe(rows, what, notes)
    grids = full_grids(list(latency))
    if len(grids) > 1:
        sizes = ", ".join(str(len(g)) for g in grids)
        notes.append(
            f"{what}: {len(latency)} points are not a full grid; kept in {len(grids)} "
            f"overlapping full-grid tables of {sizes} points"
        )
    tables = []
    for grid in grids:
        points = []
        for at in grid:
            attrs = dict(zip(axis_names, at, strict=True))
            flops, nbytes = op_at(op, {**key, **attrs}).work(mla_spec, elem_bytes(dtype))
            p10, p90 = (spreads or {}).get(at, (None, None))
            points.append(
                OpPoint(
                    at=attrs,
                    latency_us_p50=latency[at],
                    latency_us_p10=p10,
                    latency_us_p90=p90,
                    flops=flops,
                    hbm_bytes=nbytes,
                )
            )
        axes = {a: sorted({at[i] for at in grid}) for i, a in enumerate(axis_names)}
        tables.append(
            OpTable(
                op=op,
                key=dict(key),
                axes=axes,
                points=points,
                dtype=dtype,  # type: ignore[arg-type]
                impl=impl,
                source=source,
                link_bytes_per_s=link_bytes_per_s,
            )
        )
    return tables
