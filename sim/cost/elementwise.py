"""Memory-bound kernels of each layer: norms, RoPE, cache store, FP8 quant, router, SiLU-and-mul.

What SGLang runs per token besides the GEMMs and attention cores (DeepSeek-V3 layer, FP8 weights,
`d` hidden, `r_q` q_lora_rank, `d_c` kv_lora_rank, `d_s` RoPE width, `H` heads on the GPU, `i`
an intermediate width, `E` routed experts, `k` experts per token); bytes per token:

- fused residual-add + RMSNorm, before attention and before the FFN (`fused_add_rmsnorm`, in
  place): reads x and the residual, writes both: 4 x 2d B. Every layer, twice; once more after
  the last layer (the final norm).
- q_a and kv_a RMSNorms on the latents, after the fused q_a/kv_a projection: 2 x 2 r_q and
  2 x 2 d_c B (MLA with q_lora_rank; no q_a norm without it).
- RoPE on q_pe [H, d_s] and k_pe [d_s], in place, reading the BF16 cos/sin cache:
  2 x 2 (H + 1) d_s + 2 d_s B (models whose d_s dims carry no rotation skip it). GQA: every
  query and key head, full head width.
- KV-cache store (`set_kv_buffer`): reads the new latent + k_pe (BF16), writes the cache layout:
  2 (d_c + d_s) + cache bytes per token per layer.
- FP8 per-token-group quantisation in front of each FP8 GEMM (`per_token_group_quant_fp8`,
  groups of 128): reads 2 B, writes 1 B + 4/128 B per value. Inputs: fused q_a/kv_a (d; one quant,
  they share the input; two separate projections without q_lora), q_b (r_q), kv_b on the expand
  path (d_c, over every expanded cached token), o_proj (H d_v), shared-expert and dense-MLP
  gate_up (d) and down (i). Only with FP8 (or FP4) weights, whose GEMMs take FP8 activations.
  The router GEMM and lm_head stay BF16 (not quantised); the routed experts' gate_up input comes
  FP8 from the EP dispatch.
- Kimi K3's MLA output gate: sigmoid of the gate projection times the attention output,
  before o_proj: reads both, writes one: 3 x 2 H d_v B. Its projection shares the layer input's
  FP8 quant with q_a/kv_a.
- MoE router (sigmoid scores, bias, group-limited top-k, `moe_fused_gate`): reads fp32 logits
  [E], writes fp32 weights + int32 ids [k]: 4E + 8k B. MoE layers only.
- SiLU-and-mul after gate_up (shared experts, dense MLP): reads [2i], writes [i]: 6i B. Routed
  experts on the busiest EP GPU: the same plus the down-projection quant, fused into one kernel
  (`silu_and_mul_masked_post_quant_fwd`) in the masked (low-latency decode) layout:
  4i + i (1 + 4/128) B.
- Steps with prefill (DeepEP normal kernels, DeepGEMM contiguous layout), with EP: the FP8
  quantisation of the rank's hidden states before the dispatch (d), `ep_scatter` of received
  tokens into per-expert rows (2 d (1 + 4/128) B per token-expert pair) and `ep_gather` of the
  weighted expert outputs (4 d B per pair).

Each kernel is one `elementwise` op whose width makes `ops.Elementwise`'s bytes (one BF16 read + one
BF16 write of [tokens, width] = 4 x tokens x width) equal the kernel's real bytes: width = bytes per
token / 4 (fused add+RMSNorm: 2d; FP8 quant of k values: ~0.76 k). A measured elementwise table
(kernels_calib times fused add+RMSNorm at width 2d) thus prices every kernel by its bytes, and a
table point comes back exactly. Without a table a kernel is priced by the deployment's roofline
fallback (`Pricer.fallback`): its bytes at the profile's memory efficiency plus, with an engine,
the GPU time of one of that engine's smallest kernels in a CUDA graph (`sim.cost.overheads`:
1.3-1.9 us, measured), else the profile's launch figure. (Priced as a vocabulary op through a
profile without the table, it paid the profile's 5.22 us DeepGEMM residual whatever the engine.)

Fusions an engine makes, from its DeepSeek model code (a fused kernel's bytes are still paid, as
part of the kernel that does them, but not a launch of its own):

- TensorRT-LLM with attention TP (`modeling_deepseekv3.py`, `DeepseekV3DecoderLayer`:
  `PRE_MOE_FUSION` / `POST_MOE_FUSION` / `POST_MLP_FUSION`, on unless attention DP): the
  residual add + RMSNorm before each MoE layer's FFN and before every following layer (the next
  layer's input norm, the final norm after the last) run inside the all-reduce
  (`AllReduceFusionOp.RESIDUAL_RMS_NORM`). Left as kernels: the first layer's input norm and
  the dense layers' post-attention norms (their pre-MLP fusion is NVFP4-only).
- SGLang decode in CUDA graphs (`deepseek_v2.py`, `forward_absorb_prepare`): the q_a and kv_a
  RMSNorms run on two streams at once (`alt_stream`), one launch on the critical path (taken
  for every decode-only step: the capture limit, 512 requests at TP >= 4, is not checked here).

Not counted: the norms' weight vectors (read once per kernel, not per token), the indexer's
own norm and quant (DSA), KDA layers' gates and convolutions, per-tensor quant in front of FP8
absorb bmms (the bmms are priced BF16).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.cost.layer_ops import RankContext, RankSegments
from sim.cost.ops import BF16, FP8_SCALE_GROUP, Elementwise, ElementwiseKernel
from sim.cost.pricing import Pricer
from sim.cost.rate import OpTime, combine, scale
from sim.specs.profile import ELEMENTWISE, GEMM

FP8_VALUE = 1.0 + 4.0 / FP8_SCALE_GROUP  # e4m3 value plus its share of the fp32 group scale
OP_BYTES_PER_WIDTH = 2 * BF16  # ops.Elementwise: one BF16 read + one BF16 write per width unit


@dataclass(frozen=True, kw_only=True)
class Kernel:
    """One memory-bound kernel run `layers` times in a step over `tokens` rows."""

    name: str
    tokens: float
    bytes_per_token: float
    layers: int = 1
    launched: bool = True  # False: done inside another kernel (its bytes paid, no launch)

    @property
    def width(self) -> float:
        """The `ops.Elementwise` width whose bytes equal this kernel's."""
        return self.bytes_per_token / OP_BYTES_PER_WIDTH


def add_rmsnorm_bytes(d: int) -> float:
    return 4 * BF16 * d


def rmsnorm_bytes(d: int) -> float:
    return 2 * BF16 * d


def rope_bytes(rotated: int, rot_dim: int) -> float:
    """`rotated` values read and written in place, plus the cos/sin cache row (BF16)."""
    return 2 * BF16 * rotated + BF16 * rot_dim


def quant_bytes(k: float) -> float:
    return (BF16 + FP8_VALUE) * k


def silu_mul_bytes(i: float) -> float:
    return BF16 * 3 * i


def silu_mul_quant_bytes(i: float) -> float:
    return BF16 * 2 * i + FP8_VALUE * i


def gate_bytes(width: int) -> float:
    """sigmoid(gate) x attention output: reads both, writes the gated output (BF16)."""
    return BF16 * 3 * width


def router_bytes(experts: int, topk: int) -> float:
    return 4.0 * experts + 8.0 * topk


# the routed experts' activation kernels, inside a measured fused-MoE kernel's latency
def kernel_op(pr: Pricer) -> type[Elementwise]:
    """The op a memory-bound kernel is priced as: `Elementwise` from a measured elementwise
    table where the profile has one, else `ElementwiseKernel` at the deployment's roofline
    fallback (which carries the engine's per-kernel figure)."""
    measured = pr.has_table(ELEMENTWISE) or pr.fallback is None
    return Elementwise if measured else ElementwiseKernel


def kernel_time(pr: Pricer, k: Kernel) -> OpTime:
    """One run of kernel `k`, priced as `kernel_op` says."""
    op = kernel_op(pr)(tokens=k.tokens, width=k.width)
    t = pr.price(op)
    if k.launched:
        return t
    # inside another kernel: only what its bytes add, not its fixed part (nor a launch)
    seconds = t.seconds - pr.rate(op).fixed_s
    return OpTime(seconds=seconds, source=t.source, extrapolated=t.extrapolated)


def price(pr: Pricer, kernels: list[Kernel]) -> OpTime:
    """All kernels priced through the profile, each scaled by its layer count; each kernel's
    time kept by the pricer (`Pricer.pieces`, by what sets it: its rows, bytes per row, layers
    and whether it is launched), as a step's kernels recur at the rows of earlier steps."""
    kept, times = pr.pieces, []
    for k in kernels:
        if k.tokens > 0 and k.layers > 0:
            key = (k.tokens, k.bytes_per_token, k.layers, k.launched)  # hashed in C
            t = kept.find(key)
            if t is None:
                t = scale(kernel_time(pr, k), k.layers)
                kept.put(key, t)
            times.append(t)
    return combine(*times)


def attention_kernels(
    c: RankContext, s: RankSegments, layers: int, engine: str | None = None
) -> list[Kernel]:
    """Per attention layer: latent norms, RoPE, cache store and the attention GEMMs' quants."""
    m, t, fp8 = c.model, s.tokens, c.compute_dtype == "fp8"
    d, h = m.hidden_size, c.heads
    out: list[Kernel] = []
    # SGLang's graph-replayed decode runs the two latent norms on two streams at once
    norms_overlap = engine == "sglang" and bool(s.is_decode.all())

    def add(
        name: str, nbytes: float, tokens: float = t, on: bool = True, launched: bool = True
    ) -> None:
        if on:
            out.append(
                Kernel(
                    name=name,
                    tokens=tokens,
                    bytes_per_token=nbytes,
                    layers=layers,
                    launched=launched,
                )
            )

    if m.attention == "mla":
        mm = m.mla_spec
        d_s = mm.qk_rope_head_dim
        for _ in range(1 if mm.q_lora_rank else 2):  # fused q_a/kv_a: one; q_proj + kv_a: two
            add("quant_qkv_a_input", quant_bytes(d), on=fp8)
        if mm.q_lora_rank:
            add("q_a_norm", rmsnorm_bytes(mm.q_lora_rank))
            add("quant_q_b_input", quant_bytes(mm.q_lora_rank), on=fp8)
        overlapped = norms_overlap and bool(mm.q_lora_rank)
        add("kv_a_norm", rmsnorm_bytes(mm.kv_lora_rank), launched=not overlapped)
        add("rope", rope_bytes((h + 1) * d_s, d_s), on=mm.rope_rotary and d_s > 0)
        add("kv_store", BF16 * (mm.kv_lora_rank + d_s) + c.kv_bytes_layer)
        expanded = s.expanded_tokens  # kv_b runs over every expanded cached token
        add("quant_kv_b_input", quant_bytes(mm.kv_lora_rank), expanded, on=fp8 and expanded > 0)
        add("quant_o_proj_input", quant_bytes(h * mm.v_head_dim), on=fp8)
        add("output_gate", gate_bytes(h * mm.v_head_dim), on=mm.output_gate)
    else:
        g = m.gqa_spec
        kvh = max(1, g.num_kv_heads // c.tp)
        kv_values = 2 * kvh * g.head_dim
        add("quant_qkv_input", quant_bytes(d), on=fp8)
        add("rope", rope_bytes((h + kvh) * g.head_dim, g.head_dim))
        add("kv_store", BF16 * kv_values + (1.0 if c.kv_dtype == "fp8" else BF16) * kv_values)
        add("quant_o_proj_input", quant_bytes(h * g.head_dim), on=fp8)
    return out


def mlp_kernels(name: str, c: RankContext, tokens: float, inter: int, layers: int) -> list[Kernel]:
    """A SwiGLU MLP's kernels (shared experts, dense MLP): SiLU-and-mul, and with FP8 GEMMs the
    quants of the gate_up input (d) and of the down input (`inter`)."""
    if inter <= 0 or layers <= 0:
        return []
    parts = [("silu_mul", silu_mul_bytes(inter))]
    if c.compute_dtype == "fp8":
        parts += [
            ("quant_gate_up_input", quant_bytes(c.model.hidden_size)),
            ("quant_down_input", quant_bytes(inter)),
        ]
    return [
        Kernel(name=f"{name}_{part}", tokens=tokens, bytes_per_token=b, layers=layers)
        for part, b in parts
    ]


def ffn_kernels(c: RankContext, tokens: float, moe_layers: int, dense_layers: int) -> list[Kernel]:
    """Rank-side FFN kernels: the router and shared experts of MoE layers; dense MLP layers."""
    moe = c.model.moe
    shared_i = moe.n_shared_experts * moe.moe_intermediate_size // c.shared_tp
    dense_i = moe.dense_intermediate_size // c.dense_split
    route = router_bytes(moe.n_routed_experts, moe.experts_per_token)
    router = Kernel(name="router", tokens=tokens, bytes_per_token=route, layers=moe_layers)
    return [
        *([router] if moe_layers > 0 else []),
        *mlp_kernels("shared", c, tokens, shared_i, moe_layers),
        *mlp_kernels("dense", c, tokens, dense_i, dense_layers),
    ]


def residual_norms(c: RankContext, tokens: float, engine: str | None) -> list[Kernel]:
    """The residual add + RMSNorm before every attention and FFN, and the final norm. With
    TensorRT-LLM and attention TP, those its all-reduce does (module docstring) are not
    launched: what is left is the first layer's input norm and each dense layer's
    post-attention norm."""
    m = c.model
    norm = add_rmsnorm_bytes(m.hidden_size)
    layers = 2 * m.num_layers
    fused = engine == "trtllm" and c.tp > 1

    def kernel(name: str, layers: int, launched: bool = True) -> Kernel:
        return Kernel(
            name=name, tokens=tokens, bytes_per_token=norm, layers=layers, launched=launched
        )

    final = kernel("final_norm", 1, launched=not fused)
    if not fused:
        return [kernel("residual_add_norm", layers), final]
    launched = min(layers, 1 + m.moe.first_dense_layers)
    return [
        kernel("residual_add_norm", launched),
        kernel("residual_add_norm_in_allreduce", layers - launched, launched=False),
        final,
    ]


def rank_kernels(c: RankContext, s: RankSegments, engine: str | None = None) -> list[Kernel]:
    """Every rank-side elementwise kernel of one step: all layers and the final norm, with the
    fusions `engine` makes (module docstring; None: none)."""
    m, t = c.model, s.tokens
    return [
        *residual_norms(c, t, engine),
        *attention_kernels(c, s, m.attention_layers, engine),
        *ffn_kernels(c, t, m.moe_layers, m.moe.first_dense_layers),
    ]


def draft_kernels(c: RankContext, one: RankSegments) -> list[Kernel]:
    """One MTP draft pass: embedding and hidden-state norms, one MoE layer, its final norm."""
    d, n = c.model.hidden_size, one.tokens
    return [
        Kernel(name="mtp_input_norms", tokens=n, bytes_per_token=rmsnorm_bytes(d), layers=2),
        Kernel(name="residual_add_norm", tokens=n, bytes_per_token=add_rmsnorm_bytes(d), layers=2),
        *attention_kernels(c, one, 1),
        *ffn_kernels(c, n, 1, 0),
        Kernel(name="final_norm", tokens=n, bytes_per_token=add_rmsnorm_bytes(d)),
    ]


# the FP8 quantisations of a dense GEMM's BF16 input, one kernel before each projection
_PROJ = ("qkv_a", "q_b", "kv_b", "o_proj", "qkv")
GEMM_INPUT_QUANTS = frozenset(
    [f"quant_{p}_input" for p in _PROJ]
    + [f"{m}_quant_{p}_input" for m in ("shared", "dense") for p in ("gate_up", "down")]
)


def quant_in_gemm_table(pr: Pricer, engine: str | None) -> bool:
    """Whether the profile's GEMM table already holds each projection's input quantisation:
    TensorRT-LLM's table (aiconfigurator's collector, `collect_gemm.py`) times the engine's
    `Linear.forward` on a BF16 input with FP8 block scales, which quantises that input 1x128
    itself before its GEMM."""
    return engine == "trtllm" and pr.has_table(GEMM)


def rank_elementwise(
    pr: Pricer, c: RankContext, s: RankSegments, engine: str | None = None
) -> OpTime:
    """A rank's elementwise time in one step (every layer and the final norm), less the input
    quants a measured GEMM table already holds."""
    return _price_outside_gemms(pr, rank_kernels(c, s, engine), engine)


def draft_elementwise(pr: Pricer, c: RankContext, one: RankSegments) -> OpTime:
    """One MTP draft pass's elementwise time (one token per decode request), less the input
    quants a measured GEMM table already holds."""
    return _price_outside_gemms(pr, draft_kernels(c, one), c.engine)


def _price_outside_gemms(pr: Pricer, kernels: list[Kernel], engine: str | None) -> OpTime:
    """`kernels` priced, less the input quants `engine`'s measured GEMM table already holds."""
    if quant_in_gemm_table(pr, engine):
        kernels = [k for k in kernels if k.name not in GEMM_INPUT_QUANTS]
    return price(pr, kernels)
