"""A sweep grid: the cartesian product of override axes, each point a validated Scenario.

An axis is a path with its values: `--set workload.rate_req_s=10,20,40` (comma-separated) or
`--set 'workload.rate_req_s=[10, 20, 40]'` (a YAML list). A single value is an axis of one
point, i.e. a plain override. A field whose value is itself a list (`mtp_acceptance`) takes a
list of lists: `deployments.*.mtp_acceptance=[[0.8], [0.9]]`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sim.io.overrides import OverrideError, apply_overrides, parse_value, split_assignment
from sim.specs.scenario import Scenario

MAX_POINTS = 1000


@dataclass(frozen=True)
class Axis:
    """One swept path and the values it takes, in order."""

    path: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Point:
    """One grid point: its index, the value of every axis, and the scenario to run."""

    index: int
    values: dict[str, Any]
    scenario: Scenario


def _is_flow(raw: str) -> bool:
    text = raw.strip()
    return text.startswith(("[", "{", "'", '"'))


def parse_axis(text: str) -> Axis:
    """`'path=v1,v2'` or `'path=[v1, v2]'` -> Axis; OverrideError for an empty axis."""
    path, raw = split_assignment(text)
    if _is_flow(raw):
        parsed = parse_value(raw)
        values = tuple(parsed) if isinstance(parsed, list) else (parsed,)
    elif "," in raw:
        pieces = raw.split(",")
        if any(not v.strip() for v in pieces):
            raise OverrideError(
                f"{text!r} has an empty value between commas; write e.g. {path}=10,20,40"
            )
        values = tuple(parse_value(v) for v in pieces)
    else:
        values = (parse_value(raw),)
    if not values or (len(values) == 1 and values[0] is None and not raw.strip()):
        raise OverrideError(f"axis {path} has no values; write e.g. {path}=10,20,40")
    return Axis(path=path, values=values)


def grid_size(axes: Sequence[Axis]) -> int:
    return math.prod(len(a.values) for a in axes)


def grid_points(
    base: Scenario, axes: Sequence[Axis], *, max_points: int = MAX_POINTS
) -> list[Point]:
    """Every combination of axis values (the last axis varies fastest), validated up front.

    Raises OverrideError for a repeated path, an empty axis, more than `max_points` points, an
    unknown path or a value a field refuses (naming the point's values).
    """
    paths = [a.path for a in axes]
    repeated = sorted({p for p in paths if paths.count(p) > 1})
    if repeated:
        raise OverrideError(f"axis {repeated[0]} is given twice; merge its values into one --set")
    for a in axes:
        if not a.values:
            raise OverrideError(f"axis {a.path} has no values; give at least one")
    size = grid_size(axes)
    if size > max_points:
        shape = " x ".join(str(len(a.values)) for a in axes)
        raise OverrideError(
            f"the grid has {size} points ({shape}), over the limit of {max_points}: "
            "drop values or split the sweep into several runs"
        )
    points = []
    for i, combo in enumerate(itertools.product(*(a.values for a in axes))):
        values = dict(zip(paths, combo, strict=True))
        try:
            scenario = apply_overrides(base, values.items())
        except OverrideError as exc:
            raise OverrideError(f"point {i} ({_label(values)}): {exc}") from None
        points.append(Point(index=i, values=values, scenario=scenario))
    return points


def _label(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())
