"""CalibratedCost: log-space latency interpolation, extrapolation inside and just past a grid,
fallbacks, bad queries.

Every table point coming back exactly, and latency never falling as work grows, are checked
over all bundled profiles in test_table_monotone.py; tables lent across GPUs, links and grid
edges in test_table_edges.py.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pytest
from calibrated_query import DECODE_KEY, H800, decode_us, estimate, query, synthetic_gemm_profile

from sim.catalog import load_gpu
from sim.catalog.profiles import load_profile
from sim.cost.attention_ops import op_at
from sim.cost.calibrated import CalibratedCost
from sim.cost.ops import EpDispatch, Op
from tests.cost.calibrated_query import table_work


@pytest.fixture(scope="module")
def h800() -> CalibratedCost:
    return CalibratedCost(load_profile("h800-published"), H800)


def test_interpolation_stays_between_neighbours(h800: CalibratedCost) -> None:
    lo, hi = decode_us(h800, 64, 4096).seconds, decode_us(h800, 64, 8192).seconds
    sweep = [decode_us(h800, 64, kv).seconds for kv in range(4096, 8193, 256)]
    assert sweep[0] == pytest.approx(lo) and sweep[-1] == pytest.approx(hi)
    assert all(a < b for a, b in itertools.pairwise(sweep))
    mid = decode_us(h800, 48, 4096)
    assert decode_us(h800, 32, 4096).seconds < mid.seconds < decode_us(h800, 64, 4096).seconds
    assert not mid.extrapolated


def _decode_roofline_s(batch: float, kv: float) -> float:
    shape = load_profile("h800-published").model_shape
    assert shape is not None
    flops, nbytes = table_work(
        "mla_decode", {**DECODE_KEY, "batch": batch, "kv_len": kv}, mla=shape.mla_spec()
    )
    return max(flops / H800.peak_flops_per_s("bf16"), nbytes / H800.hbm_bytes_per_s)


def test_above_the_grid_the_work_part_scales_by_roofline(h800: CalibratedCost) -> None:
    edge = decode_us(h800, 1, 131072)
    far = [decode_us(h800, 1, kv) for kv in (262144, 524288)]
    assert all(f.extrapolated and "clamped" in f.detail for f in far) and not edge.extrapolated
    # t = fixed + (edge - fixed) * roofline ratio: the growth is the ratio's, whatever fixed is
    ratio = [_decode_roofline_s(1, kv) / _decode_roofline_s(1, 131072) for kv in (262144, 524288)]
    growth = (far[1].seconds - edge.seconds) / (far[0].seconds - edge.seconds)
    assert growth == pytest.approx((ratio[1] - 1) / (ratio[0] - 1), rel=1e-9)
    # the fixed part (about 20 us) is small next to a large edge: close to holding efficiency
    big_edge, big_far = decode_us(h800, 64, 131072), decode_us(h800, 64, 262144)
    held = big_edge.seconds * _decode_roofline_s(64, 262144) / _decode_roofline_s(64, 131072)
    assert held * (1 - 1e-2) < big_far.seconds < held


def test_below_the_grid_the_fixed_latency_is_kept(h800: CalibratedCost) -> None:
    # FlashMLA's smallest published point is 20.91 us for 0.44 us of roofline work
    tiny = [decode_us(h800, 1, kv).seconds * 1e6 for kv in (16, 128, 512, 1024)]
    assert 20.0 < tiny[0] < tiny[1] < tiny[2] < tiny[3] == pytest.approx(20.91)
    # DeepEP low-latency dispatch over RDMA: published at 128 tokens per rank only
    base = {"mode": "low_latency", "hidden": 7168, "topk": 8, "link": "rdma", "ep": 16}
    ep = [query(h800, "ep_dispatch", base, {"tokens_per_rank": t}, link=50e9) for t in (1, 8, 128)]
    launch_us = h800.profile.roofline.launch_overhead_us.value
    assert launch_us < ep[0].seconds * 1e6 < ep[1].seconds * 1e6 < ep[2].seconds * 1e6
    assert ep[0].extrapolated and ep[2].seconds * 1e6 == pytest.approx(118.0)


def test_a_fixed_latency_corner_does_not_pull_interpolation_down(h800: CalibratedCost) -> None:
    # between batch 1 (fixed latency) and batch 16 (throughput) efficiency interpolation once
    # priced batch 2 at half of batch 1
    sweep = [decode_us(h800, b, 1024).seconds * 1e6 for b in (1, 2, 4, 8, 16)]
    assert all(a < b for a, b in itertools.pairwise(sweep))
    assert sweep[0] == pytest.approx(20.91) and sweep[-1] == pytest.approx(24.906)


def test_nearest_key_is_used_and_flagged(h800: CalibratedCost) -> None:
    est = decode_us(h800, 64, 4096, heads=64)
    assert est.extrapolated and "nearest key" in est.detail
    assert est.source == "published" and est.seconds > 0


def test_staircase_tables_cover_the_large_batch_points(h800: CalibratedCost) -> None:
    # batch 512 was published only up to kv 8192: a separate full-grid table holds it
    est = decode_us(h800, 512, 8192)
    assert est.seconds * 1e6 == pytest.approx(2074.245) and not est.extrapolated


def test_op_without_table_uses_roofline_factors() -> None:
    profile = load_profile("h200-roofline")
    gpu = load_gpu("h200")
    cost = CalibratedCost(profile, gpu)
    r = profile.roofline
    est = estimate(
        cost,
        "gemm",
        key={"k": 7168, "n": 1536},
        point={"m": 4096},
        flops=9e10,
        bytes_=8e7,
        dtype="fp8",
    )
    want = max(
        9e10 / (gpu.peak_flops_per_s("fp8") * r.gemm_compute_efficiency.value),
        8e7 / (gpu.hbm_bytes_per_s * r.memory_bandwidth_efficiency.value),
    )
    assert est.seconds == pytest.approx(want + r.launch_overhead_us.value * 1e-6)
    assert est.source == "roofline" and not est.extrapolated


def test_deepep_points_and_interpolation_over_ep(h800: CalibratedCost) -> None:
    base = {"mode": "low_latency", "hidden": 7168, "topk": 8}
    nv = query(
        h800,
        "ep_dispatch",
        {**base, "link": "nvlink", "ep": 8},
        {"tokens_per_rank": 128},
        link=160e9,
    )
    assert nv.seconds * 1e6 == pytest.approx(77.0)
    ib = [
        query(
            h800,
            "ep_combine",
            {**base, "link": "rdma", "ep": ep},
            {"tokens_per_rank": 128},
            link=50e9,
        ).seconds
        * 1e6
        for ep in (32, 48, 64)
    ]
    assert ib[0] == pytest.approx(273.0) and ib[2] == pytest.approx(314.0)
    assert ib[0] < ib[1] < ib[2]


def test_bad_queries_are_refused(h800: CalibratedCost) -> None:
    with pytest.raises(ValueError, match="known ops are"):
        estimate(h800, "softmax", key={}, point={}, flops=1.0, bytes_=1.0)
    with pytest.raises(ValueError, match="described by batch, kv_len"):
        estimate(h800, "mla_decode", key=DECODE_KEY, point={"batch": 1}, flops=1.0, bytes_=1.0)
    roofline_only = CalibratedCost(load_profile("h200-roofline"), load_gpu("h200"))
    with pytest.raises(ValueError, match="described by tokens, width"):
        estimate(roofline_only, "elementwise", key={}, point={}, flops=0.0, bytes_=1.0)
    dispatch = EpDispatch(
        tokens_per_rank=8, ep=8, mode="normal", link="nvlink", hidden=7168, topk=8
    )
    with pytest.raises(ValueError, match="link_rate"):
        h800.rate(dispatch)


def test_log_latency_is_linear_in_log_axis() -> None:
    cost = CalibratedCost(synthetic_gemm_profile(), H800)
    lat = {p.at["m"]: p.latency_us_p50 for p in cost.profile.tables[0].points}
    m = 64.0  # halfway between 16 and 256 in log space
    flops, nbytes = table_work("gemm", {"m": m, "k": 1024, "n": 1024})
    est = estimate(
        cost, "gemm", key={"k": 1024, "n": 1024}, point={"m": m}, flops=flops, bytes_=nbytes
    )
    assert est.seconds * 1e6 == pytest.approx(math.sqrt(lat[16.0] * lat[256.0]), rel=1e-9)
    assert not est.extrapolated


def test_a_profile_from_another_gpu_lends_efficiency_and_keeps_fixed_latency() -> None:
    """FlashMLA decode is memory-bound on H800 and compute-bound on H200 (same BF16 peak, 1.43x
    the bandwidth). On H200 memory keeps the efficiency H800 measured, and the op lands near
    FlashMLA's published compute-bound rate (660 TFLOP/s on H800's peak) plus the fixed part."""
    h200, h20 = load_gpu("h200"), load_gpu("h20")
    profile = load_profile("h800-published")
    moved = CalibratedCost(profile, h200, profile_gpu=H800)
    home = CalibratedCost(profile, H800)
    shape = profile.model_shape
    assert shape is not None
    fixed_s = 20.2e-6  # the table's fixed latency (the detail line says so)
    checked = 0
    for batch, kv in itertools.product((32, 64, 128), (1024, 4096, 16384)):
        est, ref = decode_us(moved, batch, kv), decode_us(home, batch, kv)
        assert est.extrapolated and "efficiency from h800" in est.detail
        assert "fixed 20.2 us" in est.detail
        flops, nbytes = table_work(
            "mla_decode", {**DECODE_KEY, "batch": batch, "kv_len": kv}, mla=shape.mla_spec()
        )
        peak = H800.peak_flops_per_s("bf16")
        assert nbytes / H800.hbm_bytes_per_s > flops / peak
        memory_s = (ref.seconds - fixed_s) * H800.hbm_bytes_per_s / h200.hbm_bytes_per_s
        assert memory_s <= est.seconds - fixed_s < ref.seconds - fixed_s
        if flops / peak > nbytes / h200.hbm_bytes_per_s:  # compute-bound on H200
            published_s = fixed_s + flops / 660e12
            assert est.seconds == pytest.approx(published_s, rel=0.15), (batch, kv)
            checked += 1
    assert checked >= 6
    # launch and synchronisation do not follow the roofline: H800's FlashMLA table on H20
    # (6.7x less BF16 compute) lands near H20's own published smallest point (25.1 us)
    on_h20 = CalibratedCost(profile, h20, profile_gpu=H800)
    assert decode_us(on_h20, 1, 1024).seconds * 1e6 == pytest.approx(25.096, rel=0.15)


def test_a_lent_profile_carries_a_table_when_a_query_first_reads_it_once() -> None:
    """A profile lent to another GPU carries its tables there as queries read them (a run reads
    a few of its tables), each once; what a query gets does not depend on which tables were
    read before it."""
    profile, h200 = load_profile("h800-published"), load_gpu("h200")
    first = CalibratedCost(profile, h200, profile_gpu=H800)
    assert not first._carried_grids  # nothing carried before a query
    shapes = [(32, 1024), (128, 16384), (64, 4096)]
    ahead = [decode_us(first, b, kv).seconds for b, kv in shapes]
    carried = dict(first._carried_grids)
    assert 0 < len(carried) < len(profile.tables)
    assert [decode_us(first, b, kv).seconds for b, kv in shapes] == ahead
    assert all(first._carried_grids[k] is g for k, g in carried.items())  # carried once
    second = CalibratedCost(profile, h200, profile_gpu=H800)
    behind = [decode_us(second, b, kv).seconds for b, kv in reversed(shapes)]
    assert behind[::-1] == ahead


def test_a_table_answers_its_rate_directly_and_the_pricer_asks_once(h800: CalibratedCost) -> None:
    """The rate at a grid point prices that point's own work at its latency; the Pricer takes
    each shape's rate from one call (nothing backed out of latencies by probing)."""
    from sim.cost.pricing import Pricer
    from sim.cost.rate import Rate

    table = next(t for t in h800.profile.tables if t.op == "mla_decode" and t.key == DECODE_KEY)
    point = table.points[len(table.points) // 2]
    attrs = {**table.key, **point.at}
    shape = h800.profile.model_shape
    assert shape is not None
    flops, nbytes = table_work("mla_decode", attrs, mla=shape.mla_spec())
    rate = h800.rate(op_at("mla_decode", attrs))
    t = rate.time(flops / H800.peak_flops_per_s("bf16"), nbytes / H800.hbm_bytes_per_s)
    assert t.seconds * 1e6 == pytest.approx(point.latency_us_p50, rel=1e-9)
    assert rate.source == "published" and not rate.extrapolated and 0 < rate.fixed_s < t.seconds

    calls: list[str] = []

    class Counting:
        def rate(self, op: Op, dtype: str = "bf16") -> Rate:
            calls.append(op.op)
            return h800.rate(op, dtype)

    pricer = Pricer(H800, Counting(), mla=shape.mla_spec())
    op = op_at("mla_decode", attrs)
    first = pricer.price(op)
    twice = replace(op, batch=2 * op.batch)  # type: ignore[type-var]
    again = pricer.price(op, runs=twice)
    assert calls == ["mla_decode"]
    assert first.seconds == pytest.approx(t.seconds, rel=1e-12)
    assert again.seconds == pytest.approx(rate.fixed_s + 2 * (t.seconds - rate.fixed_s))
