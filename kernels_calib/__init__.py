"""Kernel calibration: time MLA, GEMM, MoE, DSA and collective kernels and write a profile."""
