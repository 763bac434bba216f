"""Kernel figures transcribed from vendors' READMEs (reference/hardware-and-kernels.md).

These are inputs of the published and roofline profiles, each with its source; the CSV
measurements (alibaba/InferSim bench_data) are read from files by `kernels_calib.published`.
"""

from __future__ import annotations

DEEPEP = "deepseek-ai/DeepEP README (H800, NVLink ~160 GB/s, CX7 IB ~50 GB/s)"
DEEPEP_HIDDEN, DEEPEP_TOPK = 7168, 8
DEEPEP_LL_TOKENS_PER_RANK = 128
DEEPEP_NORMAL_TOKENS_PER_RANK = 4096
H800_NVLINK_BYTES_PER_S = 160e9  # DeepSeek-V3 paper's effective NVLink figure
H800_RDMA_BYTES_PER_S = 50e9  # 400 Gb/s CX7 InfiniBand per GPU

# Low-latency kernels (decode): EP -> (dispatch us, dispatch GB/s, combine us, combine GB/s).
DEEPEP_LOW_LATENCY: dict[int, tuple[float, float, float, float]] = {
    8: (77, 98, 114, 127),
    16: (118, 63, 195, 74),
    32: (155, 48, 273, 53),
    64: (173, 43, 314, 46),
    128: (192, 39, 369, 39),
    256: (194, 39, 360, 40),
}
# Normal kernels (prefill): EP -> (dispatch GB/s, combine GB/s); EP8 over NVLink, others RDMA.
DEEPEP_NORMAL: dict[int, tuple[float, float]] = {
    8: (153, 158),
    16: (43, 43),
    32: (58, 57),
    64: (51, 50),
}

FLASHMLA = "deepseek-ai/FlashMLA README (H800 SXM5, CUDA 12.8)"
FLASHMLA_DENSE_DECODE_GB_S = 3000.0  # memory-bound configurations
FLASHMLA_DENSE_DECODE_TFLOPS = 660.0  # compute-bound configurations
FLASHMLA_SPARSE_DECODE_TFLOPS = 410.0  # FP8 KV, batch 128, 128 heads, s_q 2, topk 2048
FLASHMLA_SPARSE_PREFILL_TFLOPS = 640.0
FLASHMLA_B200_SPARSE_PREFILL_TFLOPS = 1450.0
FLASHMLA_B200_SPARSE_DECODE_TFLOPS = 350.0  # FP8 KV

# FlashMLA dense decode with two query tokens per request (an MTP verify with one draft token),
# from FlashMLA's own test (tests/test_flash_mla_dense_decoding.py) run on an H100 SXM5 (the
# same 132 SMs, clocks and 80 GB of HBM3 at 3.35 TB/s as H800 SXM5, which differs in NVLink
# only): batch 128, 128 query heads, 1 KV head, d 576 / dv 512, causal, 64-token pages, lengths
# drawn around the mean. The test times the split-KV kernel alone (not the small combine
# kernel). Its s_q 1 rows of the same run, for comparison: 274, 505, 963, 1,872 us.
FLASHMLA_H100_RUN = (
    "yuqiz7/mla-decode-kernels@409076a docs/g0/flashmla_bench_raw.txt (deepseek-ai/FlashMLA"
    "@15f13e5 test on an H100 80GB HBM3, CUDA 12.8)"
)
FLASHMLA_H100_VERIFY_BATCH = 128
# mean kv_len -> latency us at s_q 2
FLASHMLA_H100_VERIFY_US: dict[int, float] = {4096: 424.0, 8192: 807.0, 16384: 1565.0, 32768: 3095.0}

DEEPGEMM = "deepseek-ai/DeepGEMM README (H800, FP8)"
# (layout, groups, m per group, n, k, TFLOP/s)
DEEPGEMM_GROUPED: tuple[tuple[str, int, int, int, int, float], ...] = (
    ("contiguous", 4, 8192, 4096, 7168, 1346),
    ("contiguous", 4, 8192, 7168, 2048, 1214),
    ("contiguous", 8, 4096, 4096, 7168, 1346),
    ("contiguous", 8, 4096, 7168, 2048, 1214),
    ("masked", 1, 1024, 4096, 7168, 1233),
    ("masked", 1, 1024, 7168, 2048, 925),
    ("masked", 2, 512, 4096, 7168, 1040),
    ("masked", 2, 512, 7168, 2048, 916),
    ("masked", 4, 256, 4096, 7168, 932),
    ("masked", 4, 256, 7168, 2048, 815),
)
DEEPGEMM_BEST_TFLOPS = max(f[-1] for f in DEEPGEMM_GROUPED)
