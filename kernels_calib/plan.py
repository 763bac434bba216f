"""What a calibration run measures: grids per kernel family, sized per device and mode.

The CUDA default grid is sized for a few minutes on one H100/H200, `--quick` for under a
minute; the CPU grids use tiny shapes (a few heads, short contexts) so the whole harness runs
inside the test suite.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernels_calib.timing import TimingConfig

FAMILIES = ("mla_decode", "mla_prefill", "gemm", "moe", "dsa", "elementwise", "comm")


@dataclass(frozen=True)
class Plan:
    device: str
    quick: bool
    heads: int  # attention heads timed (tables record it; TP ranks run fewer than the model)
    # decode is also timed at the heads of an attention-TP rank: a table measured for the
    # model's heads prices fewer heads only by extrapolation
    decode_heads: tuple[int, ...]
    decode_batch: tuple[int, ...]
    decode_kv: tuple[int, ...]
    decode_s_q: tuple[int, ...]
    kv_dtypes: tuple[str, ...]
    max_cache_tokens: int  # batch x kv_len cap per decode point (memory)
    prefill_seq: tuple[int, ...]
    prefill_prefix: tuple[int, ...]
    chunk_tokens: int
    crossover_prefix: tuple[int, ...]
    crossover_new: tuple[int, ...]
    gemm_m: tuple[int, ...]
    gemm_dtypes: tuple[str, ...]
    gemm_full_model: bool  # all projections incl. dense MLP and lm_head, or attention ones only
    moe_experts: tuple[int, ...]
    moe_tokens_per_expert: tuple[float, ...]
    dsa_batch: tuple[int, ...]
    dsa_kv: tuple[int, ...]
    dsa_prefill_s_q: tuple[int, ...]
    comm_bytes: tuple[int, ...]
    timing: TimingConfig
    elementwise_tokens: tuple[int, ...]
    elementwise_hidden: tuple[int, ...]  # fused add+RMSNorm: width 2 x hidden


def make_plan(device: str, quick: bool, model_heads: int) -> Plan:
    if device == "cpu":
        return Plan(
            device=device,
            quick=quick,
            heads=min(8, model_heads),
            decode_heads=_tp_heads(min(8, model_heads), 4 if not quick else 1),
            decode_batch=(1, 4),
            decode_kv=(128, 512),
            decode_s_q=(1, 2) if quick else (1, 2, 4),
            kv_dtypes=("bf16",),
            max_cache_tokens=1 << 14,
            prefill_seq=(64, 256),
            prefill_prefix=(256, 1024),
            chunk_tokens=256,
            # tiny: a CPU without native BF16 (no AVX-512 BF16) runs a BF16 matmul at well under
            # 1 GFLOP/s, and the expand path's kv_b up-projection covers prefix + new tokens
            crossover_prefix=(128,),
            crossover_new=(8, 16, 32),
            gemm_m=(1, 16) if quick else (1, 16, 128),
            gemm_dtypes=("bf16",),
            gemm_full_model=False,
            moe_experts=(1,),
            moe_tokens_per_expert=(1, 8),
            dsa_batch=(2,),
            dsa_kv=(2048, 4096),
            dsa_prefill_s_q=(16,),
            comm_bytes=(1 << 16, 1 << 20),
            timing=TimingConfig(warmup=1, runs=5, min_runs=3, budget_s=0.05, cuda_graphs=False),
            elementwise_tokens=(1, 64) if quick else (1, 16, 256),
            elementwise_hidden=(256, 1024),
        )
    if quick:
        return Plan(
            device=device,
            quick=True,
            heads=model_heads,
            decode_heads=(model_heads,),  # the minute does not hold a second grid
            decode_batch=(1, 32, 128),
            decode_kv=(4096, 32768),
            decode_s_q=(1, 2),
            kv_dtypes=("bf16", "fp8"),
            max_cache_tokens=1 << 22,
            prefill_seq=(1024, 4096),
            prefill_prefix=(8192,),
            chunk_tokens=8192,
            crossover_prefix=(8192,),
            crossover_new=(32, 64, 128, 256, 512),
            gemm_m=(1, 64, 1024, 8192),
            gemm_dtypes=("bf16", "fp8"),
            gemm_full_model=False,
            moe_experts=(8,),
            moe_tokens_per_expert=(4, 64, 1024),
            dsa_batch=(32,),
            dsa_kv=(8192, 65536),
            dsa_prefill_s_q=(2048,),
            comm_bytes=(1 << 20, 1 << 26),
            timing=TimingConfig(warmup=2, runs=20, min_runs=5, budget_s=0.05),
            elementwise_tokens=(1, 64, 1024, 16384),
            elementwise_hidden=(256, 1536, 7168),
        )
    return Plan(
        device=device,
        quick=False,
        heads=model_heads,
        decode_heads=_tp_heads(model_heads, 8),  # attention TP8, the usual TP deployment
        decode_batch=(1, 8, 32, 64, 128),
        decode_kv=(1024, 4096, 16384, 65536),
        decode_s_q=(1, 2, 4),
        kv_dtypes=("bf16", "fp8"),
        max_cache_tokens=1 << 22,
        prefill_seq=(512, 1024, 2048, 4096, 8192),
        prefill_prefix=(4096, 16384),
        chunk_tokens=8192,
        crossover_prefix=(4096, 16384, 32768),
        crossover_new=(16, 32, 64, 128, 256, 512, 1024),
        gemm_m=(1, 4, 16, 64, 256, 1024, 4096, 16384),
        gemm_dtypes=("bf16", "fp8"),
        gemm_full_model=True,
        moe_experts=(1, 8, 32),
        moe_tokens_per_expert=(1, 4, 16, 64, 256, 1024, 4096),
        dsa_batch=(1, 32, 128),
        dsa_kv=(4096, 16384, 65536),
        dsa_prefill_s_q=(1024, 4096),
        comm_bytes=tuple(1 << e for e in range(16, 31, 2)),
        timing=TimingConfig(warmup=3, runs=30, min_runs=5, budget_s=0.15),
        elementwise_tokens=(1, 4, 16, 64, 256, 1024, 4096, 16384),
        elementwise_hidden=(256, 512, 1536, 4096, 7168),
    )


def _tp_heads(heads: int, tp: int) -> tuple[int, ...]:
    """The model's heads and, where they divide, the heads of one attention-TP rank."""
    return (heads,) if tp <= 1 or heads % tp else (heads, heads // tp)
