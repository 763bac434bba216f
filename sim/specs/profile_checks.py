"""Shape checks of a profile's raw JSON before `Profile` validates it, naming the file and table.

`Profile`'s own validators check meaning (full grids, increasing axes, work matching latency);
these run first and keep bad shapes from reaching them as a TypeError or a hang: a number given
as a list, a grid whose axes multiply out to more points than the table holds (building it would
take forever), latencies or work so large or small that a step prices at inf or NaN.
`sim.specs.limits.check_data` has already bounded depth, strings and finiteness.
"""

from __future__ import annotations

import math
from typing import Any

from sim.specs.limits import check_data

MIN_LATENCY_US = 1e-6  # a picosecond: below any kernel, above float underflow in 1/latency
MAX_LATENCY_US = 1e12  # 11.6 days
MAX_WORK = 1e30  # FLOPs or bytes of one point (a 1e30-FLOP kernel is 1e12 s on any GPU)
OPTIONAL_FIELDS = ("latency_us_p10", "latency_us_p90")  # null allowed
NUMBER_FIELDS = ("latency_us_p50", "latency_us_p10", "latency_us_p90", "flops", "hbm_bytes")


class ProfileShapeError(ValueError):
    """A profile whose JSON has the wrong shape; the message names the table and the field."""


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _table_label(i: int, table: dict[str, Any]) -> str:
    op = table.get("op")
    return f"tables[{i}]" + (f" ({op})" if isinstance(op, str) else "")


def _check_point(at: str, j: int, point: Any) -> None:
    if not isinstance(point, dict):
        raise ProfileShapeError(f"{at}.points[{j}]: a point is an object, not {_kind(point)}")
    for name in NUMBER_FIELDS:
        if name not in point or (point[name] is None and name in OPTIONAL_FIELDS):
            continue
        value = point[name]
        if not _number(value):
            raise ProfileShapeError(f"{at}.points[{j}].{name}: a number, not {_kind(value)}")
        low, high = (
            (MIN_LATENCY_US, MAX_LATENCY_US) if name.startswith("latency") else (0, MAX_WORK)
        )
        if not low <= value <= high or not math.isfinite(value):
            raise ProfileShapeError(
                f"{at}.points[{j}].{name}={value!r}: give a value in [{low:g}, {high:g}]"
            )
    coords = point.get("at")
    if not isinstance(coords, dict) or not all(_number(v) for v in coords.values()):
        raise ProfileShapeError(f"{at}.points[{j}].at: an object of axis name -> number")


def _kind(value: Any) -> str:
    return f"a {type(value).__name__}" if value is not None else "null"


def check_profile_shape(data: dict[str, Any], origin: str) -> None:
    """ProfileShapeError naming `origin`, the table and the field for a shape `Profile` would
    crash or hang on (and LimitError for one over `sim.specs.limits`)."""
    check_data(data, f"{origin}: ")
    tables = data.get("tables", [])
    if not isinstance(tables, list):
        raise ProfileShapeError(f"{origin}: tables: a list of op tables, not {_kind(tables)}")
    for i, table in enumerate(tables):
        if not isinstance(table, dict):
            raise ProfileShapeError(
                f"{origin}: tables[{i}]: an op table object, not {_kind(table)}"
            )
        at = f"{origin}: {_table_label(i, table)}"
        axes, points = table.get("axes", {}), table.get("points", [])
        if not isinstance(axes, dict) or not isinstance(points, list):
            raise ProfileShapeError(f"{at}: axes is an object of lists and points a list")
        size = 1
        for name, values in axes.items():
            if not isinstance(values, list) or not all(_number(v) for v in values):
                raise ProfileShapeError(f"{at}.axes.{name}: a list of numbers")
            size *= max(len(values), 1)
            if size > max(len(points), 1):  # a full grid has one point per combination
                raise ProfileShapeError(
                    f"{at}: its axes span more combinations than its {len(points)} points; "
                    "a table holds one point per grid combination"
                )
        for j, point in enumerate(points):
            _check_point(at, j, point)
