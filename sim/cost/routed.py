"""One MoE layer's routed experts on the busiest EP GPU: its tokens and grouped GEMMs.

The busiest GPU sets the unit's MoE time: its token-expert pairs follow from the routing skew
and EPLB replicas (`sim.cost.experts`); its grouped GEMMs read only the experts that receive
tokens (`experts_touched`). Their activation kernels are in `sim.cost.elementwise`. The same
skew sizes what the busiest GPU receives in the EP exchange (`receive_skew`, used by
`sim.cost.comm_ops`).
"""

from __future__ import annotations

import math

from sim.cost.experts import balanced_busiest_tokens, busiest_gpu_tokens
from sim.cost.layer_ops import compute_dtype, weight_excess_bytes
from sim.cost.ops import Moe, MoeDown, MoeUp
from sim.cost.pricing import Pricer
from sim.cost.rate import ZERO, OpTime, combine
from sim.specs.deployment import DEFAULT_EXPERT_ZIPF_EXPONENT, Deployment
from sim.specs.model import ModelSpec


def busiest_tokens(model: ModelSpec, d: Deployment, unit_tokens: float) -> float:
    """Token-expert pairs on the busiest EP GPU when the unit runs `unit_tokens` tokens."""
    moe = model.moe
    return busiest_gpu_tokens(
        unit_tokens * moe.experts_per_token,
        moe.n_routed_experts,
        d.ep,
        d.expert_zipf_exponent,
        d.eplb_redundant_experts,
        moe.experts_per_token,
    )


def receive_skew(model: ModelSpec, d: Deployment, unit_tokens: float) -> float:
    """Token-expert pairs the busiest EP GPU receives, over what the busiest GPU receives when
    every GPU holds an equal share of the experts under uniform random routing (how DeepEP's
    published benchmarks route: 256 experts on 8 to 256 GPUs). 1.0 for even routing on a layout
    that divides the experts evenly; it grows with Zipf skew and with the layout's own
    imbalance (DeepSeek-V3 on EP72 without EPLB: some GPUs hold 4 of the 256 experts, the mean
    is 3.56, so the busiest receives 1.125x), and shrinks with EPLB replicas."""
    if unit_tokens <= 0 or d.ep == 1:
        return 1.0
    pairs = unit_tokens * model.moe.experts_per_token
    return busiest_tokens(model, d, unit_tokens) / balanced_busiest_tokens(pairs, d.ep)


def experts_touched(local: int, pairs: float) -> float:
    """Expected distinct experts among `local` that `pairs` token-expert pairs land on, each
    pair on one of them uniformly: local (1 - (1 - 1/local)^pairs). Experts that receive no
    token are not read."""
    if pairs <= 0:
        return 0.0
    return local * (1.0 - (1.0 - 1.0 / local) ** pairs)


def prices_fused(pr: Pricer, d: Deployment) -> bool:
    """Whether the routed experts are priced from a measured fused-MoE table (whose latency holds
    the whole MoE kernel: its GEMMs and the activation and quant between them)."""
    fused = compute_dtype(d.weight_dtype) == d.weight_dtype  # FP4 weights: no fused table
    return fused and pr.has_table("moe") and d.eplb_redundant_experts == 0


def routed_gemms(
    pr: Pricer, model: ModelSpec, d: Deployment, unit_tokens: float, decode_only: bool
) -> OpTime:
    """Grouped up (gate+up) and down GEMMs of one MoE layer on the busiest EP GPU.

    Work follows `ops.MoeUp`'s grouped-GEMM convention over the experts actually read: FP8
    inputs with FP8 weights (the dispatch sends FP8 tokens; the down input is quantised with
    the SiLU-and-mul), BF16 with BF16 weights."""
    if unit_tokens <= 0:
        return ZERO
    if prices_fused(pr, d):
        return fused_moe(pr, model, d, unit_tokens)
    moe = model.moe
    busiest = busiest_tokens(model, d, unit_tokens)
    local = math.ceil((moe.n_routed_experts + d.eplb_redundant_experts) / d.ep)
    inter = moe.moe_intermediate_size // d.moe_tp
    h, dtype = model.hidden_size, compute_dtype(d.weight_dtype)
    attrs = {
        "tokens_per_expert": max(busiest / local, 1e-3),
        "num_local_experts": local,
        "hidden": h,
        "intermediate": inter,
        "layout": "masked" if decode_only else "contiguous",
    }
    touched = experts_touched(local, busiest)
    read = {**attrs, "num_local_experts": touched, "tokens_per_expert": busiest / touched}
    excess = weight_excess_bytes(d.weight_dtype)
    times = []
    for op in (MoeUp, MoeDown):
        runs = op(**read, weight_excess=excess)  # type: ignore[arg-type]
        times.append(pr.price(op.of(attrs), dtype, runs=runs))
    return combine(*times)


# The default Zipf exponent is defined as the one matching aiconfigurator-core's default routing,
# a power law of exponent 1.01 (`sim.specs.deployment`): the two laws have different forms, so
# only these two points correspond exactly; any other exponent reads the nearest table, flagged.
_TABLE_POWER_LAW = {0.0: 0.0, DEFAULT_EXPERT_ZIPF_EXPONENT: 1.01}


def table_power_law(zipf_exponent: float) -> float:
    """The fused-MoE tables' `power_law_alpha` for a deployment's Zipf exponent: 0 (balanced)
    and the default (aiconfigurator-core's 1.01) exactly; other exponents as given."""
    return _TABLE_POWER_LAW.get(zipf_exponent, zipf_exponent)


def fused_moe(pr: Pricer, model: ModelSpec, d: Deployment, unit_tokens: float) -> OpTime:
    """One MoE layer's routed experts from a fused-MoE table (`moe` op): the unit's tokens
    routed top-k over the experts split EP x TP, timed on the busiest GPU at the table's
    expert-load power law of the deployment's skew (`table_power_law`), so the skew's cost is the
    measured one (tables are without EPLB replicas; with them the grouped-GEMM path runs)."""
    moe = model.moe
    attrs = {
        "tokens": unit_tokens,
        "hidden": model.hidden_size,
        "intermediate": moe.moe_intermediate_size,
        "topk": moe.experts_per_token,
        "experts": moe.n_routed_experts,
        "moe_tp": d.moe_tp,
        "moe_ep": d.ep,
        "power_law_alpha": table_power_law(d.expert_zipf_exponent),
    }
    dtype = compute_dtype(d.weight_dtype)
    return pr.price(Moe.of(attrs), dtype)
