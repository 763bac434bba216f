"""Sweep grids: axis syntax, the cartesian product, and the limits on what a grid may be."""

from __future__ import annotations

import pytest

from sim.io.overrides import OverrideError
from sim.search.grid import Axis, grid_points, grid_size, parse_axis
from tests.builders import tiny


def test_axis_syntax() -> None:
    assert parse_axis("workload.rate_req_s=10,20,40") == Axis("workload.rate_req_s", (10, 20, 40))
    assert parse_axis("workload.rate_req_s=[10, 20.5]") == Axis("workload.rate_req_s", (10, 20.5))
    assert parse_axis("deployments.*.kv_dtype=fp8") == Axis("deployments.*.kv_dtype", ("fp8",))
    assert parse_axis("run.max_requests=null,100").values == (None, 100)
    nested = parse_axis("deployments.*.mtp_acceptance=[[0.8], [0.9]]")
    assert nested.values == ([0.8], [0.9])


@pytest.mark.parametrize("text", ["workload.rate_req_s=", "workload.rate_req_s=[]", "a=1,,2"])
def test_empty_axes_are_refused(text: str) -> None:
    with pytest.raises(OverrideError, match=r"no values|empty value"):
        parse_axis(text)
    with pytest.raises(OverrideError, match="no values"):
        grid_points(tiny(), [Axis("run.seed", ())])


def test_product_in_order_with_every_point_applied() -> None:
    axes = [parse_axis("workload.rate_req_s=2,4,8"), parse_axis("deployments.*.kv_dtype=bf16,fp8")]
    points = grid_points(tiny(), axes)
    assert grid_size(axes) == len(points) == 6
    assert [p.index for p in points] == list(range(6))
    assert [tuple(p.values.values()) for p in points] == [
        (2, "bf16"), (2, "fp8"), (4, "bf16"), (4, "fp8"), (8, "bf16"), (8, "fp8"),
    ]  # fmt: skip
    for p in points:
        assert p.scenario.workload.rate_req_s == p.values["workload.rate_req_s"]  # type: ignore[union-attr]
        assert {d.kv_dtype for d in p.scenario.deployments} == {p.values["deployments.*.kv_dtype"]}  # type: ignore[union-attr]


def test_no_axes_is_the_base_scenario() -> None:
    points = grid_points(tiny(), [])
    assert len(points) == 1 and points[0].scenario == tiny() and points[0].values == {}


def test_size_limit_and_repeated_axis() -> None:
    axes = [Axis("run.seed", tuple(range(40))), Axis("workload.rate_req_s", tuple(range(1, 30)))]
    with pytest.raises(OverrideError, match=r"1160 points \(40 x 29\), over the limit of 1000"):
        grid_points(tiny(), axes)
    assert len(grid_points(tiny(), axes, max_points=2000)) == 1160
    with pytest.raises(OverrideError, match="given twice"):
        grid_points(tiny(), [Axis("run.seed", (1,)), Axis("run.seed", (2,))])


def test_a_bad_point_names_its_values() -> None:
    with pytest.raises(OverrideError, match=r"point 1 \(workload.rate_req_s=-1\).*greater than 0"):
        grid_points(tiny(), [Axis("workload.rate_req_s", (1, -1))])
