"""The routed experts' memory-bound kernels in one MoE layer, on the busiest EP GPU.

SiLU-and-mul after the experts' gate_up and, with FP8 weights, the down-projection's input
quant; in steps with prefill (DeepEP's normal kernels, DeepGEMM's contiguous layout) also the
quant before the dispatch, the scatter into per-expert rows and the weighted gather back. Bytes
per token and how a kernel is priced: `sim.cost.elementwise`, whose kernels these are.
"""

from __future__ import annotations

from sim.cost.elementwise import (
    FP8_VALUE,
    Kernel,
    price,
    quant_bytes,
    silu_mul_bytes,
    silu_mul_quant_bytes,
)
from sim.cost.ops import BF16
from sim.cost.pricing import Pricer
from sim.cost.rate import ZERO, OpTime
from sim.cost.routed import busiest_tokens, prices_fused
from sim.specs.deployment import Deployment
from sim.specs.model import ModelSpec

# the kernels a measured fused-MoE table already times between its GEMMs
IN_FUSED_MOE = frozenset({"routed_silu_mul", "routed_silu_mul_quant", "routed_quant_down_input"})


def routed_kernels(
    model: ModelSpec,
    deployment: Deployment,
    unit_tokens: float,
    decode_only: bool,
    sender_tokens: float = 0.0,
) -> list[Kernel]:
    """One MoE layer's routed-expert kernels on the busiest EP GPU (as `_routed_moe` sizes it):
    SiLU-and-mul and the down-projection input quant (fused in the masked layout).

    Steps with prefill run DeepEP's normal kernels and DeepGEMM's contiguous layout, which add
    (with EP) the FP8 quantisation of the busiest sender's `sender_tokens` before the dispatch
    (which waits for the rank with the most tokens, as `sim.cost.comm_ops` sizes it), the
    scatter of received tokens into per-expert rows (a read and a write of each token-expert
    pair, FP8 with scales) and the weighted gather of the expert outputs back (a BF16 read per
    pair and a write per received token, counted as one per pair). Low-latency (decode) kernels
    dispatch into the per-expert layout and reduce in the combine themselves.
    """
    moe, d, h = model.moe, deployment, model.hidden_size
    if unit_tokens <= 0:
        return []
    busiest = busiest_tokens(model, d, unit_tokens)
    inter = moe.moe_intermediate_size // d.moe_tp
    fp8 = d.weight_dtype != "bf16"
    if decode_only:
        if not fp8:
            return [
                Kernel(
                    name="routed_silu_mul", tokens=busiest, bytes_per_token=silu_mul_bytes(inter)
                )
            ]
        nbytes = silu_mul_quant_bytes(inter)
        return [Kernel(name="routed_silu_mul_quant", tokens=busiest, bytes_per_token=nbytes)]
    out = [Kernel(name="routed_silu_mul", tokens=busiest, bytes_per_token=silu_mul_bytes(inter))]
    if fp8:
        out.append(
            Kernel(
                name="routed_quant_down_input", tokens=busiest, bytes_per_token=quant_bytes(inter)
            )
        )
    if d.ep > 1:
        value = FP8_VALUE if fp8 else BF16  # the dispatched token's bytes per value
        if fp8 and sender_tokens > 0:
            per_gpu = sender_tokens / d.attn_tp
            out.append(
                Kernel(name="quant_dispatch_input", tokens=per_gpu, bytes_per_token=quant_bytes(h))
            )
        out.append(Kernel(name="ep_scatter", tokens=busiest, bytes_per_token=2 * value * h))
        out.append(Kernel(name="ep_gather", tokens=busiest, bytes_per_token=2 * BF16 * h))
    return out


def routed_elementwise(
    pr: Pricer,
    model: ModelSpec,
    deployment: Deployment,
    unit_tokens: float,
    decode_only: bool,
    sender_tokens: float = 0.0,
) -> OpTime:
    """One MoE layer's routed-expert memory-bound kernels on the busiest EP GPU. A measured
    fused-MoE table already holds the activation and quant between its GEMMs: only the
    exchange's kernels outside it are added then. TensorRT-LLM's table times the engine's whole
    MoE module (aiconfigurator's collector builds it with `fused_moe.create_moe` and times its
    forward), whose own kernels permute the tokens to their experts, quantise them and reduce
    the outputs back (its Hopper path runs no DeepEP exchange, `sim.cost.comm_ops`): no kernel
    is left outside the table then."""
    if prices_fused(pr, deployment) and deployment.engine == "trtllm":
        return ZERO
    kernels = routed_kernels(model, deployment, unit_tokens, decode_only, sender_tokens)
    if prices_fused(pr, deployment):
        kernels = [k for k in kernels if k.name not in IN_FUSED_MOE]
    return price(pr, kernels)
