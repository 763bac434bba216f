"""CUDA-only kernels called with the right arguments: checked on meta tensors, without a GPU."""

from __future__ import annotations

import sys

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


def _stand_in_flashinfer(monkeypatch: pytest.MonkeyPatch) -> None:
    """`flashinfer.mla.BatchMLAPagedAttentionWrapper` as documented (plan with CSR indptrs over
    pages, run on split latent / RoPE tensors), computed with the torch latent kernel."""
    import types

    from kernels_calib import mla_torch

    class Wrapper:
        def __init__(self, workspace: torch.Tensor, backend: str = "auto") -> None:
            self.plan_args: tuple[object, ...] = ()

        def plan(self, *args: object) -> None:
            assert len(args) == 12
            self.plan_args = args

        def run(self, q_nope, q_pe, ckv, kpe):  # type: ignore[no-untyped-def]
            qo, kvp, idx, lens, heads, d_c, d_s, page, causal, scale, _, _ = self.plan_args
            b, s, kv = len(lens), int(qo[1]), int(kvp[1])
            assert page == 1 and torch.equal(idx, torch.arange(b * kv, dtype=torch.int32))
            q = torch.cat([q_nope, q_pe], dim=-1).view(b, s, heads, d_c + d_s)
            cache = torch.cat([ckv, kpe], dim=-1).view(b, kv, d_c + d_s)
            out = mla_torch.latent_attention(q, cache, d_c, scale, causal=causal)
            return out.reshape(b * s, heads, d_c)

    mla = types.ModuleType("flashinfer.mla")
    mla.BatchMLAPagedAttentionWrapper = Wrapper  # type: ignore[attr-defined]
    pkg = types.ModuleType("flashinfer")
    pkg.mla = mla  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "flashinfer", pkg)
    monkeypatch.setitem(sys.modules, "flashinfer.mla", mla)


@pytest.mark.parametrize("s_q", [1, 3])
def test_flashinfer_decode_adapter_lays_out_pages_and_heads(
    monkeypatch: pytest.MonkeyPatch, s_q: int
) -> None:
    """The FlashInfer MLA candidate (CUDA only) driven through a stand-in of its documented API:
    the adapter's paging, splits and reshapes give the absorb path's output."""
    from kernels_calib import mla_decode

    _stand_in_flashinfer(monkeypatch)
    _absorb_check(mla_decode._flashinfer_mla, "flashinfer_mla", batch=2, s_q=s_q, kv_len=40)


def _stand_in_flash_mla(monkeypatch: pytest.MonkeyPatch) -> None:
    """`flash_mla` as its README documents it: metadata from the cache lengths, then decode over
    a paged cache [blocks, 64, 1, 576] addressed by a block table, computed with torch."""
    import types

    from kernels_calib import mla_torch

    def get_mla_metadata(lens: torch.Tensor, q_per_kv_head: int, kv_heads: int) -> tuple:
        assert kv_heads == 1
        return torch.zeros(1), torch.zeros(1)

    def flash_mla_with_kvcache(q, paged, table, lens, d_v, meta, splits, softmax_scale, causal):  # type: ignore[no-untyped-def]
        b = q.shape[0]
        assert paged.shape[1:3] == (64, 1) and table.shape[0] == b
        caches = [paged[table[i].long()].reshape(-1, paged.shape[-1])[: lens[i]] for i in range(b)]
        cache = torch.stack(caches)
        return mla_torch.latent_attention(q, cache, d_v, softmax_scale, causal=causal), None

    mod = types.ModuleType("flash_mla")
    mod.get_mla_metadata = get_mla_metadata  # type: ignore[attr-defined]
    mod.flash_mla_with_kvcache = flash_mla_with_kvcache  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "flash_mla", mod)


@pytest.mark.parametrize("s_q", [1, 2])
def test_flash_mla_decode_adapter_pages_the_cache_in_blocks_of_64(
    monkeypatch: pytest.MonkeyPatch, s_q: int
) -> None:
    """The FlashMLA candidate (CUDA only) through a stand-in of its documented API: a 100-token
    cache is padded to two 64-token blocks and addressed by the block table."""
    from kernels_calib import mla_decode

    _stand_in_flash_mla(monkeypatch)
    _absorb_check(mla_decode._flash_mla, "flash_mla", batch=3, s_q=s_q, kv_len=100)


def _absorb_check(make_kernel, impl: str, *, batch: int, s_q: int, kv_len: int) -> None:  # type: ignore[no-untyped-def]
    """Build a decode candidate on a CPU context and check its absorb path against expand."""
    from kernels_calib import correctness
    from kernels_calib.context import Ctx
    from kernels_calib.plan import make_plan
    from sim.catalog import load_model

    model = load_model("deepseek-v3")
    gen = torch.Generator().manual_seed(0)
    ctx = Ctx(plan=make_plan("cpu", True, 8), model=model, gen=gen, device_name="cpu")
    kernel = make_kernel(ctx)
    assert kernel is not None and kernel.impl == impl
    m = model.mla_spec
    case = correctness.random_case(
        batch=batch, s_q=s_q, kv_len=kv_len, heads=4, d_c=m.kv_lora_rank,
        d_s=m.qk_rope_head_dim, d_k=m.qk_nope_head_dim, d_v=m.v_head_dim, gen=gen, device="cpu",
    )  # fmt: skip
    result = correctness.check_absorb_kernel(case, kernel.core, torch.float32, 1e-4, "stand-in")
    assert result.ok, result.message
