"""Roofline op timing: max(FLOPs / peak, bytes / bandwidth) / efficiency + launch overhead.

`RooflineCost` is the estimator used when no calibration profile is given; it answers `rate`
as `sim.cost.calibrated.CalibratedCost` does and labels every op "roofline".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sim.cost.ops import Op
from sim.cost.rate import Rate
from sim.specs.gpu import GpuSpec


class OpEstimator(Protocol):
    """Gives an op's rate at its shape."""

    def rate(self, op: Op, dtype: str = "bf16") -> Rate: ...


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

    def rate(self, op: Op, dtype: str = "bf16") -> Rate:
        """The same rate at every shape: 1 / each efficiency, plus the launch."""
        return Rate(
            compute_s_per_s=1.0 / self.compute_efficiency,
            memory_s_per_s=1.0 / self.memory_efficiency,
            fixed_s=self.launch_overhead_s,
            source="roofline",
        )
