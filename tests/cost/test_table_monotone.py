"""Every bundled profile table: its points come back exactly, and latency never falls as work grows.

The property runs each table's op at the table's own key and dtype, on the GPU it was measured
on or on any other catalog GPU (whose roofline may be limited by the other resource), moving one
axis at a time over a range 8x below and above the grid. Where the table's own points fall along
that axis (measurement noise, or a kernel that really gets faster), the estimate may fall with
them; everywhere else it must not.
"""

from __future__ import annotations

import bisect
import itertools
import math
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.catalog import gpu_names, load_gpu
from sim.catalog.profiles import load_profile, profile_names
from sim.cost.calibrated import CalibratedCost
from sim.cost.rate import OpTime
from sim.specs.profile import COMM_OPS, OpTable
from tests.cost.calibrated_query import estimate as table_estimate
from tests.cost.calibrated_query import link_seconds, table_work

SPAN = 8.0  # how far below and above each grid the property reaches
ROUNDING = 1e-12  # relative slack for float rounding only


@cache
def _cost(name: str, gpu: str = "") -> CalibratedCost:
    """The profile on `gpu`, or on the GPU it was measured on."""
    profile = load_profile(name)
    home = load_gpu(profile.device.gpu or "")
    return CalibratedCost(profile, load_gpu(gpu) if gpu else home, profile_gpu=home)


def _tables(name: str) -> list[OpTable]:
    return list(load_profile(name).tables)


WITH_TABLES = [n for n in profile_names() if _tables(n)]
CASES = [
    (name, i, axis)
    for name in WITH_TABLES
    for i, table in enumerate(_tables(name))
    for axis in table.axes
]


def seconds(name: str, table: OpTable, point: dict[str, float], gpu: str = "") -> float:
    return estimate(name, table, point, gpu).seconds


def estimate(name: str, table: OpTable, point: dict[str, float], gpu: str = "") -> OpTime:
    cost = _cost(name, gpu)
    flops, nbytes = _work(name, table, point)
    if table.op in COMM_OPS:
        link = table.link_bytes_per_s or 0.0
        return link_seconds(
            cost, table.op, key=table.key, point=point, bytes_=nbytes, link_bytes_per_s=link
        )
    return table_estimate(
        cost, table.op, key=table.key, point=point, flops=flops, bytes_=nbytes, dtype=table.dtype
    )


def _bracket(values: list[float], x: float) -> range:
    """Grid indices whose points decide the estimate at x along one axis (clamped at edges)."""
    if x <= values[0]:
        return range(0, 1)
    if x >= values[-1]:
        return range(len(values) - 1, len(values))
    j = bisect.bisect_right(values, x) - 1
    return range(j, j + 2)


def _points_rise(table: OpTable, axis: str, point: dict[str, float], lo: float, hi: float) -> bool:
    """Whether the table's points rise along `axis` wherever they decide estimates in [lo, hi]."""
    latency = {tuple(p.at[a] for a in table.axes): p.latency_us_p50 for p in table.points}
    ranges = []
    for a, values in table.axes.items():
        if a == axis:
            first, last = _bracket(values, lo)[0], _bracket(values, hi)[-1]
            ranges.append(range(first, last + 1))
        else:
            ranges.append(_bracket(values, point[a]))
    names = list(table.axes)
    k = names.index(axis)
    for idx in itertools.product(*ranges):
        if idx[k] == ranges[k][-1]:
            continue
        up = (*idx[:k], idx[k] + 1, *idx[k + 1 :])
        here = tuple(table.axes[a][i] for a, i in zip(names, idx, strict=True))
        there = tuple(table.axes[a][i] for a, i in zip(names, up, strict=True))
        if latency[there] < latency[here]:
            return False
    return True


def _siblings(name: str, table: OpTable) -> list[OpTable]:
    """Tables the estimator may serve this key from (a staircase of full grids)."""
    return [
        t
        for t in _tables(name)
        if t.op == table.op and t.key == table.key and t.dtype == table.dtype
    ]


def _work(name: str, table: OpTable, point: dict[str, float]) -> tuple[float, float]:
    shape = _cost(name).profile.model_shape
    mla = shape.mla_spec() if shape else None
    return table_work(table.op, {**table.key, **point}, mla=mla, dtype=table.dtype)


def _work_rises(
    name: str, table: OpTable, axis: str, point: dict[str, float], lo: float, hi: float
) -> bool:
    """Whether the op is a real shape from lo to hi (new tokens are part of the cache they attend
    to) whose FLOPs and bytes never fall (DeepEP's normal kernels send fewer copies once a group
    spans two nodes: the op counts one per remote node)."""
    steps = [lo * (hi / lo) ** (i / 8) for i in range(9)]
    attrs = [{**table.key, **point, axis: x} for x in steps]
    if any(a.get("s_q", 0) > a.get("s_kv", math.inf) for a in attrs):  # type: ignore[operator]
        return False
    work = [_work(name, table, {**point, axis: x}) for x in steps]
    return all(b[0] >= a[0] and b[1] >= a[1] for a, b in itertools.pairwise(work))


def _log_uniform(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(math.log(lo), math.log(hi)).map(math.exp)


@st.composite
def moves(draw: st.DrawFn) -> tuple[str, str, OpTable, str, dict[str, float], float, float]:
    """A profile, a GPU to run it on, one of its tables, one of the table's axes, a point for
    the other axes and two values along that axis."""
    name, index, axis = draw(st.sampled_from(CASES))
    gpu = draw(st.sampled_from(gpu_names()))
    table = _tables(name)[index]
    point = {
        a: draw(_log_uniform(v[0] / SPAN, v[-1] * SPAN)) for a, v in table.axes.items() if a != axis
    }
    values = table.axes[axis]
    lo, hi = sorted(draw(_log_uniform(values[0] / SPAN, values[-1] * SPAN)) for _ in range(2))
    return name, gpu, table, axis, point, lo, hi


# the same 2,000 draws on every run, so a verdict does not depend on chance; the falls that
# random draws found before the slice rule (60,000 draws, three seeds, find none now) are
# pinned below (FOUND_FALLS)
@pytest.mark.slow
@settings(max_examples=2000, deadline=None, derandomize=True)
@given(moves())
def test_latency_never_falls_as_an_axis_grows(
    move: tuple[str, str, OpTable, str, dict[str, float], float, float],
) -> None:
    name, gpu, table, axis, point, lo, hi = move
    if not _work_rises(name, table, axis, point, lo, hi):
        return  # a smaller op: it may cost less
    if not all(_points_rise(t, axis, point, lo, hi) for t in _siblings(name, table)):
        return  # the table's own points fall here: the estimate may follow them
    low = seconds(name, table, {**point, axis: lo}, gpu)
    high = seconds(name, table, {**point, axis: hi}, gpu)
    assert high >= low * (1 - ROUNDING), (gpu, table.op, table.key, axis, point, lo, hi)


@pytest.mark.parametrize("name", WITH_TABLES)
def test_every_table_point_comes_back_exactly(name: str) -> None:
    for table in _tables(name):
        for p in table.points:
            est = estimate(name, table, dict(p.at))
            assert est.seconds * 1e6 == pytest.approx(p.latency_us_p50, rel=1e-9), (table.op, p.at)
            assert not est.extrapolated and est.source == _cost(name).profile.kind


@pytest.mark.parametrize("name", WITH_TABLES)
def test_below_every_grid_an_op_still_costs_a_launch(name: str) -> None:
    launch_s = load_profile(name).roofline.launch_overhead_us.value * 1e-6
    for table in _tables(name):
        smallest = min(p.latency_us_p50 for p in table.points) * 1e-6
        est = estimate(name, table, {a: v[0] / SPAN for a, v in table.axes.items()})
        assert est.extrapolated and est.seconds >= min(launch_s, smallest) * (1 - ROUNDING)


# falls random draws found, each along m with n held off the grid or inside it:
# (profile, GPU run on, gemm k, dtype, n, m from, m to)
FOUND_FALLS = [
    # n 4.5x past the grid's 65,536: q's weight bytes are 4.5x c's, its m x k input bytes
    # c's, so q's traffic grew proportionally less than c's where c's measured time stayed
    # flat; q, priced by the work ratio at c, fell 0.03%
    ("b200-sglang", "h100", 5120, "fp8", 294_556.0, 37.0, 64.3),
    ("h200-sglang", "b200", 16384, "fp8", 72_840.0, 49.1, 54.6),
    # n below the grid (256), carried to a GPU whose ridge lies elsewhere: 0.17%
    ("b200-trtllm", "h20", 1536, "bf16", 55.0, 20.0, 160.0),
    ("b200-trtllm", "h20", 1536, "fp8", 55.0, 20.0, 160.0),
    # m from below the grid into it with n inside, where the table falls along n: a slice
    # that carried its running maximum across that fall priced the smaller op 1.6% higher
    ("h100-sglang", "h100", 2048, "bf16", 610.9, 0.34, 1.54),
    ("b200-sglang", "b200", 1024, "bf16", 521.9, 0.15, 1.0),
]


@pytest.mark.parametrize(("name", "gpu", "k", "dtype", "n", "lo", "hi"), FOUND_FALLS)
def test_found_falls_stay_fixed(
    name: str, gpu: str, k: int, dtype: str, n: float, lo: float, hi: float
) -> None:
    table = next(
        t for t in _tables(name) if t.op == "gemm" and t.key == {"k": k} and t.dtype == dtype
    )
    steps = [lo * (hi / lo) ** (i / 40) for i in range(41)]
    times = [seconds(name, table, {"n": n, "m": m}, gpu) for m in steps]
    falls = [(m, b / a - 1) for m, (a, b) in zip(steps[1:], itertools.pairwise(times), strict=True)]
    assert all(f >= -ROUNDING for _, f in falls), [x for x in falls if x[1] < -ROUNDING]
