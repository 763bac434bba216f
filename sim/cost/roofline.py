"""Roofline op timing: max(FLOPs / peak, bytes / bandwidth) / efficiency + launch overhead.

`RooflineCost` is the estimator used when no calibration profile is given; it has the same
`estimate` interface as `sim.cost.calibrated.CalibratedCost` and labels every op "roofline".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from sim.cost.rate import OpTime
from sim.specs.gpu import GpuSpec


class OpEstimator(Protocol):
    """Prices one op from its FLOPs and bytes (and, if calibrated, its shape)."""

    def estimate(
        self,
        op: str,
        *,
        key: Mapping[str, object],
        point: Mapping[str, float],
        flops: float,
        bytes_: float,
        dtype: str = "bf16",
    ) -> OpTime: ...


def roofline_seconds(gpu: GpuSpec, flops: float, bytes_: float, dtype: str = "bf16") -> float:
    """Ideal time: the slower of compute at peak and HBM traffic at full bandwidth."""
    return max(flops / gpu.peak_flops_per_s(dtype), bytes_ / gpu.hbm_bytes_per_s)


@dataclass(frozen=True)
class RooflineCost:
    """Pure roofline at stated efficiencies (default: datasheet peaks, no launch cost)."""

    gpu: GpuSpec
    compute_efficiency: float = 1.0
    memory_efficiency: float = 1.0
    launch_overhead_s: float = 0.0

    def estimate(
        self,
        op: str,
        *,
        key: Mapping[str, object],
        point: Mapping[str, float],
        flops: float,
        bytes_: float,
        dtype: str = "bf16",
    ) -> OpTime:
        t = max(
            flops / (self.gpu.peak_flops_per_s(dtype) * self.compute_efficiency),
            bytes_ / (self.gpu.hbm_bytes_per_s * self.memory_efficiency),
        )
        return OpTime(seconds=t + self.launch_overhead_s, source="roofline")
