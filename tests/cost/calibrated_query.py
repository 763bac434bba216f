"""Shared by the CalibratedCost tests: price one op from a profile's tables as the cost model
would, its work counted by its op type (or given), its shape as the tables' `key` and `point`."""

from __future__ import annotations

from collections.abc import Mapping

from sim.catalog import load_gpu
from sim.catalog.profiles import load_profile
from sim.cost.attention_ops import op_at
from sim.cost.calibrated import CalibratedCost
from sim.cost.ops import elem_bytes
from sim.cost.rate import OpTime, Rate
from sim.specs.model import MlaSpec
from sim.specs.profile import (
    COMM_OPS,
    OP_ATTRIBUTES,
    DeviceInfo,
    OpPoint,
    OpTable,
    Profile,
    check_op,
)

H800 = load_gpu("h800")
DECODE_KEY = {"s_q": 1, "kv_dtype": "bf16", "heads": 128}


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


def _applied(rate: Rate, compute_s: float, memory_s: float) -> OpTime:
    """`rate` applied to the work, with how it was read (no work costs nothing)."""
    seconds = rate.time(compute_s, memory_s).seconds if max(compute_s, memory_s) > 0 else 0.0
    return OpTime(
        seconds=seconds, source=rate.source, extrapolated=rate.extrapolated, detail=rate.detail
    )


def estimate(
    cost: CalibratedCost,
    op: str,
    *,
    key: Mapping[str, object],
    point: Mapping[str, float],
    flops: float,
    bytes_: float,
    dtype: str = "bf16",
) -> OpTime:
    """Seconds of a compute op doing `flops` and `bytes_` at the shape `key` and `point` give
    together (each attribute once)."""
    rate = cost.rate(op_at(op, _attributes(op, key, point)), dtype)
    compute_s = flops / cost.gpu.peak_flops_per_s(dtype)
    return _applied(rate, compute_s, bytes_ / cost.gpu.hbm_bytes_per_s)


def link_seconds(
    cost: CalibratedCost,
    op: str,
    *,
    key: Mapping[str, object],
    point: Mapping[str, float],
    bytes_: float,
    link_bytes_per_s: float,
) -> OpTime:
    """Seconds of a comm op moving `bytes_` (its type's convention) over a link of that speed."""
    rate = cost.link_rate(op_at(op, _attributes(op, key, point)), link_bytes_per_s)
    return _applied(rate, 0.0, bytes_ / link_bytes_per_s)


def query(
    cost: CalibratedCost,
    op: str,
    key: dict[str, object],
    point: dict[str, float],
    dtype: str = "bf16",
    link: float | None = None,
) -> OpTime:
    shape = cost.profile.model_shape
    flops, nbytes = table_work(op, {**key, **point}, shape.mla_spec() if shape else None, dtype)
    if op in COMM_OPS:
        assert link is not None
        return link_seconds(cost, op, key=key, point=point, bytes_=nbytes, link_bytes_per_s=link)
    return estimate(cost, op, key=key, point=point, flops=flops, bytes_=nbytes, dtype=dtype)


def table_work(
    op: str, attrs: Mapping[str, object], mla: MlaSpec | None = None, dtype: str = "bf16"
) -> tuple[float, float]:
    """FLOPs and bytes of the table op `op` at `attrs`, as its type counts them."""
    return op_at(op, attrs).work(mla, elem_bytes(dtype))


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
