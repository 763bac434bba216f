"""GPU datasheet figures: the peaks a roofline divides by, and the memory a deployment fills."""

from __future__ import annotations

from pydantic import Field

from sim.specs.base import Spec

GB = 1e9
GIB, MIB = float(2**30), 2**20


class GpuSpec(Spec):
    """One accelerator as its datasheet states it (dense figures, no sparsity)."""

    name: str = Field(description="Catalog name, e.g. 'h200'.")
    display_name: str = Field(description="Marketing name, e.g. 'H200 SXM'.")
    bf16_tflops: float = Field(gt=0, description="Dense BF16 tensor-core peak, TFLOP/s.")
    fp8_tflops: float = Field(gt=0, description="Dense FP8 tensor-core peak, TFLOP/s.")
    hbm_gb: float = Field(gt=0, description="HBM capacity as the datasheet states it, GB.")
    hbm_usable_mib: int | None = Field(
        default=None,
        gt=0,
        description="Memory the device exposes (nvidia-smi memory.total, torch total_memory), "
        "MiB (2^20 bytes): what a serving engine divides among weights, KV cache and "
        "activations. NVIDIA's memory sizes are binary (an '80 GB' H100 shows 81,559 MiB); "
        "unset, hbm_gb is read as GiB.",
    )
    hbm_tb_s: float = Field(gt=0, description="HBM bandwidth, TB/s (1e12 bytes/s).")
    nvlink_gb_s: float = Field(
        gt=0, description="Intra-node GPU-to-GPU bandwidth per GPU, one direction, GB/s."
    )
    nic_gb_s: float = Field(gt=0, description="Inter-node RDMA bandwidth per GPU, GB/s.")
    source: str = Field(description="Where these figures come from.")

    @property
    def hbm_bytes(self) -> float:
        """Device memory in bytes (`hbm_usable_mib`, else `hbm_gb` GiB)."""
        if self.hbm_usable_mib is not None:
            return float(self.hbm_usable_mib * MIB)
        return self.hbm_gb * GIB

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.hbm_tb_s * 1e12

    def peak_flops_per_s(self, dtype: str) -> float:
        """Dense tensor-core peak for a compute dtype: 'bf16', or 'fp8' (FP4 counted at FP8)."""
        if dtype == "bf16":
            return self.bf16_tflops * 1e12
        if dtype in ("fp8", "fp4"):
            return self.fp8_tflops * 1e12
        raise ValueError(f"unknown compute dtype {dtype!r}: use 'bf16' or 'fp8'")

    @property
    def ridge_flop_per_byte(self) -> float:
        """BF16 roofline knee: above this arithmetic intensity a kernel is compute-bound."""
        return self.peak_flops_per_s("bf16") / self.hbm_bytes_per_s
