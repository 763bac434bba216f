"""Shared by the CalibratedCost tests: price one op from a profile's tables as the cost model
would, its work counted by `op_work`."""

from __future__ import annotations

from sim.catalog import load_gpu
from sim.catalog.profiles import load_profile
from sim.cost.calibrated import CalibratedCost
from sim.cost.op_work import op_work
from sim.cost.rate import OpTime
from sim.specs.profile import COMM_OPS, DeviceInfo, OpPoint, OpTable, Profile

H800 = load_gpu("h800")
DECODE_KEY = {"s_q": 1, "kv_dtype": "bf16", "heads": 128}


def query(
    cost: CalibratedCost,
    op: str,
    key: dict[str, object],
    point: dict[str, float],
    dtype: str = "bf16",
    link: float | None = None,
) -> OpTime:
    shape = cost.profile.model_shape
    flops, nbytes = op_work(
        op, {**key, **point}, mla_spec=shape.mla_spec() if shape else None, dtype=dtype
    )
    if op in COMM_OPS:
        assert link is not None
        return cost.link_seconds(op, key=key, point=point, bytes_=nbytes, link_bytes_per_s=link)
    return cost.estimate(op, key=key, point=point, flops=flops, bytes_=nbytes, dtype=dtype)


def decode_us(cost: CalibratedCost, batch: float, kv: float, **key: object) -> OpTime:
    return query(cost, "mla_decode", {**DECODE_KEY, **key}, {"batch": batch, "kv_len": kv})


def synthetic_gemm_profile(effs: dict[float, float] | None = None) -> Profile:
    """A gemm table over m with efficiency 0.2 at m = 16 and 0.8 at m = 256 (or `effs`)."""
    roof = load_profile("h800-roofline").roofline
    points = []
    for m, eff in (effs or {16.0: 0.2, 256.0: 0.8}).items():
        flops = 2 * m * 1024 * 1024
        nbytes = 2.0 * (m * 1024 + 1024 * 1024) + 2 * m * 1024
        t = max(flops / H800.peak_flops_per_s("bf16"), nbytes / H800.hbm_bytes_per_s) / eff
        points.append(OpPoint(at={"m": m}, latency_us_p50=t * 1e6, flops=flops, hbm_bytes=nbytes))
    table = OpTable(
        op="gemm",
        key={"k": 1024, "n": 1024},
        axes={"m": [16.0, 256.0]},
        points=points,
        dtype="bf16",
        impl="t",
        source="synthetic",
    )
    return Profile(
        schema_version=1,
        name="s",
        kind="measured",
        device=DeviceInfo(name="t"),
        tables=[table],
        roofline=roof,
    )
