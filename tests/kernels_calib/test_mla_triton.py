"""The fused Triton MLA kernel against the unfused torch reference: under Triton's interpreter on
the CPU (where Triton is installed; CI does not install it) and in BF16 on a CUDA GPU."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

# (batch, query tokens, heads, cache tokens): one split and several, causal rows, a ragged tail,
# and many query tokens split over the cache, so early rows see little of the last split
SHAPES = [
    (2, 1, 4, 50), (1, 3, 4, 700), (3, 2, 16, 300), (1, 5, 2, 40), (1, 250, 1, 800),
    (2, 150, 2, 1100),
]  # fmt: skip

CHECK = """
import math, sys, torch
from kernels_calib import mla_torch, mla_triton
d_c, d_s, dtype, dev = int(sys.argv[1]), int(sys.argv[2]), getattr(torch, sys.argv[3]), sys.argv[4]
if dev == "cpu":  # size splits as for a GPU: several per request, early rows see none of the last
    mla_triton._processors = lambda device: 64
gen = torch.Generator(device=dev).manual_seed(0)
worst = 0.0
for b, s, h, kv in {shapes}:
    q = torch.randn(b, s, h, d_c + d_s, generator=gen, device=dev).to(dtype)
    c = torch.randn(b, kv, d_c + d_s, generator=gen, device=dev).to(dtype)
    scale = 1 / math.sqrt(d_c // 4 + d_s)
    out = mla_triton.latent_attention(q, c, d_c, scale).float()
    ref = mla_torch.latent_attention(q.float(), c.float(), d_c, scale)
    assert torch.isfinite(out).all()
    worst = max(worst, ((out - ref).norm() / ref.norm()).item())
print(worst)
"""


def _worst_error(d_c: int, d_s: int, dtype: str, device: str, env: dict[str, str]) -> float:
    root = Path(__file__).resolve().parents[2]
    code = CHECK.format(shapes=SHAPES)
    args = [sys.executable, "-W", "ignore", "-c", code, str(d_c), str(d_s), dtype, device]
    done = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return float(done.stdout.split()[-1])


def test_interpreted_kernel_matches_torch() -> None:
    """FP32 under the interpreter (its numpy dot has no BF16): the algorithm, splits and masks."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    assert _worst_error(64, 16, "float32", "cpu", env) < 1e-5


@pytest.mark.gpu
def test_cuda_kernel_matches_torch_in_bf16() -> None:
    """DeepSeek's widths (latent 512, RoPE 64) in BF16 on the GPU."""
    pytest.importorskip("triton")
    worst = _worst_error(512, 64, "bfloat16", "cuda", dict(os.environ))
    assert math.isfinite(worst) and worst < 2e-2
