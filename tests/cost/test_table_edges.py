"""CalibratedCost across edges: a table lent to another GPU or link, queried past one grid edge
while growing along another, below a grid, across the ridge, and continuous where a grid ends.
"""

from __future__ import annotations

import itertools

import pytest
from calibrated_query import H800, decode_us, estimate, query, synthetic_gemm_profile

from sim.catalog import load_gpu
from sim.catalog.profiles import load_profile
from sim.cost.calibrated import CalibratedCost
from sim.specs.profile import COMM_OPS
from tests.cost.calibrated_query import table_work


@pytest.fixture(scope="module")
def h800() -> CalibratedCost:
    return CalibratedCost(load_profile("h800-published"), H800)


def test_a_table_run_where_its_limit_differs_still_costs_more_as_it_grows() -> None:
    """DeepGEMM's FP8 GEMM on H20 (296 TFLOP/s, 4 TB/s) is memory-bound at m = 32 and
    compute-bound from m = 64; on H800 it stays memory-bound to m ~ 300. Memory keeps the 33% of
    bandwidth H20 measured at m = 32 beyond it, so m = 64 no longer costs 15% less than m = 32.
    A synthetic table memory-bound on both GPUs moves by exactly the bandwidth ratio."""
    profile = load_profile("h20-published")
    for gpu in ("h800", "h200", "b200"):
        cost = CalibratedCost(profile, load_gpu(gpu), profile_gpu=load_gpu("h20"))
        times = [
            query(cost, "gemm", {"k": 2048, "n": 2048}, {"m": m}, dtype="fp8").seconds
            for m in (4.0, 8.0, 16.0, 24.0, 32.0, 45.0, 64.0, 90.0, 128.0, 256.0, 1024.0)
        ]
        assert all(b >= a * (1 - 1e-12) for a, b in itertools.pairwise(times)), (gpu, times)
    h200 = load_gpu("h200")
    rising = {16.0: 0.05, 256.0: 0.06}  # latency rises with m, well above one launch
    moved = CalibratedCost(synthetic_gemm_profile(rising), h200, profile_gpu=H800)
    home = CalibratedCost(synthetic_gemm_profile(rising), H800)
    key = {"k": 1024, "n": 1024}
    grows = [  # the fixed latency cancels in the difference
        query(c, "gemm", key, {"m": 256.0}).seconds - query(c, "gemm", key, {"m": 16.0}).seconds
        for c in (moved, home)
    ]
    assert grows[0] / grows[1] == pytest.approx(
        H800.hbm_bytes_per_s / h200.hbm_bytes_per_s, rel=1e-9
    )


def test_past_one_edge_a_query_still_costs_more_as_it_grows_along_another() -> None:
    """h200-measured's absorbed extend below its shortest prefix (4096): the table's efficiency
    rises with new tokens there (the kernel grows compute-bound), while a 665-token prefix
    stays memory-bound. More new tokens must still cost more, on and between grid nodes."""
    cost = CalibratedCost(load_profile("h200-measured"), load_gpu("h200"))
    shape = cost.profile.model_shape
    assert shape is not None
    times = []
    for new in (2.7, 8.0, 16.0, 20.0, 24.0, 32.0, 48.0, 64.0):
        point = {"new_tokens": new, "prefix_len": 665.0}
        flops, nbytes = table_work(
            "mla_extend_absorb", {"heads": 128, **point}, mla=shape.mla_spec()
        )
        est = estimate(
            cost, "mla_extend_absorb", key={"heads": 128}, point=point, flops=flops, bytes_=nbytes
        )
        assert est.extrapolated
        times.append(est.seconds)
    assert all(b >= a for a, b in itertools.pairwise(times)), times


def _absorb_extend_us(cost: CalibratedCost, new: float, prefix: float) -> float:
    shape = cost.profile.model_shape
    assert shape is not None
    point = {"new_tokens": new, "prefix_len": prefix}
    flops, nbytes = table_work("mla_extend_absorb", {"heads": 128, **point}, mla=shape.mla_spec())
    est = estimate(
        cost, "mla_extend_absorb", key={"heads": 128}, point=point, flops=flops, bytes_=nbytes
    )
    return est.seconds * 1e6


def test_no_prefix_is_the_limit_of_a_short_one() -> None:
    """A zero prefix lies off the log grid; it is moved to like any value outside it, so no
    prefix costs what a one-token prefix does, and more new tokens still cost more."""
    cost = CalibratedCost(load_profile("h200-measured"), load_gpu("h200"))
    for new in (2.0, 64.0, 512.0):
        assert _absorb_extend_us(cost, new, 0.0) == pytest.approx(
            _absorb_extend_us(cost, new, 1.0), rel=0.01
        )
    at_zero = [_absorb_extend_us(cost, n, 0.0) for n in (2.0, 16.0, 64.0, 512.0)]
    assert all(b >= a for a, b in itertools.pairwise(at_zero)), at_zero


@pytest.mark.parametrize("name", ["h20-published", "h200-measured", "h800-published"])
def test_below_a_grid_an_op_costs_no_more_than_the_grid_corner(name: str) -> None:
    """A quarter of every axis's smallest value: less compute and less traffic than the table's
    smallest point, so no slower than it."""
    profile = load_profile(name)
    gpu = load_gpu(profile.device.gpu or "")
    cost = CalibratedCost(profile, gpu)
    shape = profile.model_shape.mla_spec() if profile.model_shape else None
    checked = 0
    for table in profile.tables:
        if table.op in COMM_OPS:
            continue
        corner = {a: v[0] for a, v in table.axes.items()}
        small = {a: v / 4 for a, v in corner.items()}
        work = [table_work(table.op, {**table.key, **p}, mla=shape, dtype=table.dtype)
                for p in (corner, small)]  # fmt: skip
        if not all(0 < s <= c for s, c in zip(work[1], work[0], strict=True)):
            continue
        at = {**table.key, **small}
        flops, nbytes = work[1]
        est = estimate(cost,
            table.op, key=table.key, point={a: at[a] for a in table.axes}, flops=flops,
            bytes_=nbytes, dtype=table.dtype,
        )  # fmt: skip
        lowest = next(p for p in table.points if p.at == corner).latency_us_p50 * 1e-6
        assert est.seconds <= lowest * (1 + 1e-9), (table.op, table.key)
        checked += 1
    assert checked > 10


def test_a_memory_bound_query_below_a_compute_bound_grid_is_priced_by_its_traffic() -> None:
    """h200-measured's expanded prefill: its smallest measured chunk (512 new tokens) is
    compute-bound at low efficiency. 16 new tokens over a 6,775-token prefix are memory-bound:
    reading the expanded K and V takes 116 us at full bandwidth, 161 us at the profile's memory
    efficiency. Priced by the compute-bound point's efficiency for its traffic (the roofline
    ratio before, or the larger work ratio) it came out at 0.9 ms or more."""
    profile = load_profile("h200-measured")
    cost = CalibratedCost(profile, load_gpu("h200"))
    shape = profile.model_shape
    assert shape is not None
    table = next(t for t in profile.tables if t.op == "mla_prefill" and "prefix_len" not in t.key)
    point = {"seq_len": 16.0, "prefix_len": 6775.0}
    flops, nbytes = table_work("mla_prefill", {**table.key, **point}, mla=shape.mla_spec())
    est = estimate(cost, "mla_prefill", key=table.key, point=point, flops=flops, bytes_=nbytes)
    traffic_s = nbytes / load_gpu("h200").hbm_bytes_per_s
    assert est.extrapolated and traffic_s < est.seconds < 3 * traffic_s


def test_fewer_heads_than_the_table_move_smoothly_where_its_op_crosses_the_ridge() -> None:
    """h200-measured's 128-head decode at batch 64 crosses H200's ridge near 1,390 tokens of
    context. A 16- or 64-head query priced from it must neither jump nor fall there (split by
    resource at the query, the 16-head decode fell from 165 to 46 us over 40 tokens)."""
    cost = CalibratedCost(load_profile("h200-measured"), load_gpu("h200"))
    for heads in (16, 64):
        times = [decode_us(cost, 64, kv, heads=heads).seconds for kv in range(1300, 1501, 10)]
        steps = [b / a for a, b in itertools.pairwise(times)]
        assert all(1 - 1e-12 <= s <= 1.02 for s in steps), (heads, steps)
    # (64, 1K) is memory-bound at 14.5% of bandwidth and (64, 4K) compute-bound: at batch 48 a
    # 16-head decode must not get cheaper from 1K to 4K, nor jump as the batch reaches 64
    times = [decode_us(cost, 48, kv, heads=16).seconds for kv in (1024, 1536, 2048, 3072, 4096)]
    assert all(b >= a * (1 - 1e-12) for a, b in itertools.pairwise(times)), times
    near = [decode_us(cost, batch, 4096, heads=16).seconds for batch in (63.99, 64.0, 64.01)]
    assert near[0] <= near[1] <= near[2] <= near[0] * 1.001, near


def test_a_comm_table_queried_over_another_link_is_priced_at_that_link() -> None:
    """DeepEP's low-latency NVLink point (128 tokens per rank) queried over a faster link: the
    same price at the grid point as beside it, and less than over the table's own link."""
    profile = load_profile("h800-published")
    cost = CalibratedCost(profile, H800)
    table = next(
        t
        for t in profile.tables
        if t.op == "ep_dispatch" and t.key.get("mode") == "low_latency" and "ep" in t.key
    )
    own = table.link_bytes_per_s
    assert own is not None
    times = {
        (tokens, link): query(
            cost, "ep_dispatch", table.key, {"tokens_per_rank": tokens}, link=link
        ).seconds
        for tokens in (127.99, 128.0, 128.01)
        for link in (own, 3 * own)
    }
    for link in (own, 3 * own):
        assert times[(128.0, link)] == pytest.approx(times[(127.99, link)], rel=1e-3)
        assert times[(128.0, link)] == pytest.approx(times[(128.01, link)], rel=1e-3)
    assert times[(128.0, 3 * own)] < times[(128.0, own)]


@pytest.mark.parametrize(("name", "gpu"), [("h800-published", "h100"), ("h200-measured", "h100")])
def test_the_pricer_reproduces_an_extrapolated_estimate(name: str, gpu: str) -> None:
    """The Pricer prices an op's own work at the rate the table gives for its shape, so it
    reproduces the estimate carried from another GPU or key (when it backed the rates out of
    the estimator by probing FLOPs and bytes apart, it came out 11-26% below)."""
    from sim.cost.attention_ops import op_at
    from sim.cost.pricing import Pricer

    profile = load_profile(name)
    home = load_gpu(profile.device.gpu or "")
    cost = CalibratedCost(profile, load_gpu(gpu), profile_gpu=home)
    shape = profile.model_shape
    assert shape is not None
    pricer = Pricer(load_gpu(gpu), cost, mla=shape.mla_spec())
    for batch, kv, heads, s_q in itertools.product(
        (8, 64, 128), (1024, 2048, 8192), (16, 128), (1, 2)
    ):
        attrs = {
            "batch": float(batch),
            "kv_len": float(kv),
            "s_q": s_q,
            "kv_dtype": "bf16",
            "heads": heads,
        }
        flops, nbytes = table_work("mla_decode", attrs, mla=shape.mla_spec())
        key = {k: attrs[k] for k in ("s_q", "kv_dtype", "heads")}
        direct = estimate(cost,
            "mla_decode", key=key, point={"batch": attrs["batch"], "kv_len": attrs["kv_len"]},
            flops=flops, bytes_=nbytes,
        )  # fmt: skip
        priced = pricer.price(op_at("mla_decode", attrs))
        assert priced.seconds == pytest.approx(direct.seconds, rel=1e-6), attrs


def test_a_table_op_crosses_its_grid_edge_without_a_step() -> None:
    """Just outside the grid the table's own op is carried, just inside it is read as measured:
    both must agree at the edge (blending each resource apart cost 12.5% less at batch 128.0001
    than at 128, 1,300 tokens of context)."""
    cost = CalibratedCost(load_profile("h200-measured"), load_gpu("h200"))
    for kv in (1300.0, 2048.0, 3000.0, 16384.0):
        at, past = (decode_us(cost, batch, kv).seconds for batch in (128.0, 128.0001))
        assert at <= past <= at * 1.001, (kv, at, past)
