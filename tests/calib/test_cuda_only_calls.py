"""CUDA-only kernels called with the right arguments: checked on meta tensors, without a GPU."""

from __future__ import annotations

import pytest
import torch

from kernels_calib import mla_torch


@pytest.mark.parametrize(
    "lse_attention", [mla_torch.attention_lse_flash_vpad, mla_torch.attention_lse_fused]
)
@pytest.mark.parametrize("causal", [True, False])
def test_fused_lse_kernels_return_output_and_lse_shapes(
    lse_attention: mla_torch.LseAttention, causal: bool
) -> None:
    q, k, v = (
        torch.empty(*shape, device="meta", dtype=torch.bfloat16)
        for shape in ((2, 4, 16, 192), (2, 4, 40, 192), (2, 4, 40, 128))
    )
    out, lse = lse_attention(q, k, v, 0.07, causal)
    assert out.shape == (2, 4, 16, 128) and out.dtype == torch.bfloat16
    assert lse.shape == (2, 4, 16) and lse.dtype == torch.float32


def test_padded_sdpa_matches_plain_sdpa_on_cpu() -> None:
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 2, 8, 192, generator=gen), torch.randn(1, 2, 24, 192, generator=gen)
    v = torch.randn(1, 2, 24, 128, generator=gen)
    plain = mla_torch.expanded_attention(q, k, v, 0.07)
    padded = mla_torch.expanded_attention_vpad(q, k, v, 0.07)
    assert padded.shape == plain.shape
    assert torch.allclose(padded, plain, atol=1e-5)


def test_fp8_gemm_operands_pass_their_check_through_scaled_mm() -> None:
    """The FP8 GEMM is timed on CUDA only, but torch._scaled_mm also runs on CPU: the operand
    layout and scales the CUDA run uses are checked here."""
    from kernels_calib import gemm
    from kernels_calib.context import Ctx
    from kernels_calib.plan import make_plan
    from sim.catalog import load_model

    model = load_model("deepseek-v3")
    ctx = Ctx(
        plan=make_plan("cpu", True, model.num_heads),
        model=model,
        gen=torch.Generator().manual_seed(0),
        device_name="cpu",
    )
    assert gemm._check(ctx, "fp8")
    assert ctx.notes[-1].startswith("gemm fp8 [torch_scaled_mm]: relative error")


def test_fp8_grouped_moe_operands_fit_scaled_grouped_mm() -> None:
    """The FP8 grouped expert GEMM (CUDA only): operand layouts and scale shapes checked on meta
    tensors, and the quantised operands' dequantised product close to the BF16 one on CPU."""
    from kernels_calib import moe

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 16, 256, generator=gen).to(torch.bfloat16)
    w = (torch.randn(3, 256, 64, generator=gen) / 16).to(torch.bfloat16)
    x8, w8, sx, sw = moe.fp8_operands(x, w)
    assert w8.stride()[-2:] == (1, 256)  # column-major weights
    assert sx.shape == (3, 16) and sw.shape == (3, 64)
    out = moe.fp8_grouped(*(t.to("meta") for t in (x8, w8, sx, sw)))
    assert out.shape == (3, 16, 64) and out.dtype == torch.bfloat16
    want = torch.bmm(x.float(), w.float())
    err = (moe.dequantised(x8, w8, sx, sw) - want).norm() / want.norm()
    assert err < moe.BOUNDS["fp8"]
