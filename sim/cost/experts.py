"""Expert-load imbalance: how much more than the mean the busiest EP GPU receives.

Routing popularity is Zipf(s) over experts (s = 0: even), capped at 1/k of all token-expert
pairs for top-k routing (a token picks k distinct experts, so no expert can receive more than
every token; the excess goes to the others in proportion). Experts sit on GPUs in one fixed
pseudo-random order, the same for every scenario and seed (a layout, not a draw: the cost model
stays a pure function of the deployment); EPLB adds redundant replicas of the hottest experts
and packs replicas onto GPUs largest-first, which lowers the busiest GPU's share. On top of the
static skew, a finite batch spreads tokens multinomially, and under EPLB each batch's popularity
also drifts from the statistics the placement was computed from (`EPLB_LOAD_DRIFT`): the busiest
of G GPUs sits ~sqrt(2 ln G) standard deviations above the mean.
"""

from __future__ import annotations

import math
from functools import cache, lru_cache

import numpy as np

# Per-batch drift of a GPU's routed load around its share under a static EPLB placement: the
# relative standard deviation left once the multinomial spread of the batch's own tokens is
# taken out. TensorRT-LLM's offline-EPLB example (NVIDIA/TensorRT-LLM
# examples/wide_ep/ep_load_balancer/README.md) counts DeepSeek-R1's routed token-expert pairs per
# rank and iteration on EP36 with 288 slots (32 redundant experts, placed from the counts of the
# same dataset): mean 1,024 pairs per rank, standard deviation across ranks 53.98 averaged over
# layers and iterations (before EPLB, on EP32: 491.65). Binomial spread alone would give
# sqrt(1024 (1 - 1/36)) = 31.6; the rest, sqrt(53.98^2 - 31.6^2) / 1024 = 0.0428, is popularity
# that a placement computed from past statistics does not follow. It is taken to scale with a
# GPU's load at any batch size (a prefill batch holds fewer independent sequences than that
# decode-sized one, so if anything it drifts more). Applies only with EPLB replicas and skewed
# routing: even routing (Zipf 0, "perfect balance") has no drift, and without EPLB the default
# skew already stands for the whole busiest-GPU ratio of aiconfigurator-core's per-batch
# routing draws (`sim.specs.deployment.DEFAULT_EXPERT_ZIPF_EXPONENT`).
EPLB_LOAD_DRIFT = 0.0428


def cap_shares(p: np.ndarray, cap: float) -> np.ndarray:
    """Shares summing to 1 with none above `cap`: the excess is spread over the uncapped ones in
    proportion to their shares (repeated until none overflows)."""
    if cap * len(p) < 1.0:
        raise ValueError(f"{len(p)} shares cannot each stay at or below {cap:g}")
    p = p.astype(np.float64, copy=True)
    for _ in range(len(p)):
        over = p > cap * (1.0 + 1e-12)
        if not over.any():
            break
        excess = float((p[over] - cap).sum())
        p[over] = cap
        room = p < cap
        p[room] += excess * p[room] / p[room].sum()
    return p


def zipf_popularity(n_experts: int, s: float, experts_per_token: int = 1) -> np.ndarray:
    """Each expert's share of token-expert pairs: Zipf(s), capped at 1/experts_per_token."""
    # each weight by Python's float power (libm), not numpy's: see `sim.cost.libm`
    weights = np.array([float(r) ** -s for r in range(1, n_experts + 1)])
    p = cap_shares(weights / np.sum(weights), 1.0 / experts_per_token)
    # popularity unrelated to expert id, in one fixed layout: seed-independent by design, so the
    # busiest GPU is a property of the deployment, not of a run's random draws
    order = np.random.default_rng(0).permutation(n_experts)
    return p[order]


@cache
def static_gpu_shares(
    n_experts: int, ep: int, zipf_s: float, redundant: int, experts_per_token: int = 1
) -> tuple[float, ...]:
    """Share of all routed tokens each EP GPU receives, busiest first."""
    p = zipf_popularity(n_experts, zipf_s, experts_per_token)
    if redundant == 0:
        per_gpu = math.ceil(n_experts / ep)
        loads = np.zeros(ep)
        np.add.at(loads, np.arange(n_experts) // per_gpu, p)
        return tuple(sorted(loads, reverse=True))
    replicas = np.ones(n_experts, dtype=np.int64)
    for _ in range(redundant):  # each extra replica goes to the expert with the hottest replica
        replicas[np.argmax(p / replicas)] += 1
    slots = math.ceil((n_experts + redundant) / ep)
    pieces = np.repeat(p / replicas, replicas)
    loads = np.zeros(ep)
    free = np.full(ep, slots)
    for w in np.sort(pieces)[::-1]:  # longest-processing-time-first packing
        g = int(np.argmin(np.where(free > 0, loads, np.inf)))
        loads[g] += w
        free[g] -= 1
    return tuple(sorted(loads, reverse=True))


def busiest_gpu_tokens(
    routed_tokens: float,
    n_experts: int,
    ep: int,
    zipf_s: float,
    redundant: int,
    experts_per_token: int = 1,
) -> float:
    """Expected token-expert assignments on the busiest EP GPU for `routed_tokens` assignments
    of top-`experts_per_token` routing: each GPU's static share, plus its batch's multinomial
    spread and, under EPLB with skewed routing, its popularity drift (`EPLB_LOAD_DRIFT`)."""
    if ep == 1 or routed_tokens <= 0:
        return routed_tokens
    drift = EPLB_LOAD_DRIFT if redundant > 0 and zipf_s > 0 else 0.0
    return _busiest(routed_tokens, n_experts, ep, zipf_s, redundant, experts_per_token, drift)


# remembered: a run asks for the same few hundred rounded token counts again and again (a step's
# exchange, experts and their kernels each ask once)
@lru_cache(maxsize=1 << 14)
def _busiest(
    routed_tokens: float,
    n_experts: int,
    ep: int,
    zipf_s: float,
    redundant: int,
    experts_per_token: int,
    drift: float,
) -> float:
    shares = np.asarray(static_gpu_shares(n_experts, ep, zipf_s, redundant, experts_per_token))
    mean = routed_tokens * shares
    variance = routed_tokens * shares * (1.0 - shares) + (drift * mean) ** 2
    return float(np.max(mean + np.sqrt(variance) * math.sqrt(2.0 * math.log(ep))))


def balanced_busiest_tokens(routed_tokens: float, ep: int) -> float:
    """Expected assignments on the busiest of `ep` GPUs that each hold an equal share of the
    experts under uniform random routing (DeepEP's benchmark setting): the mean plus the batch
    noise, with no imbalance from the layout itself."""
    if ep == 1 or routed_tokens <= 0:
        return routed_tokens
    share = 1.0 / ep
    spread = math.sqrt(routed_tokens * share * (1.0 - share)) * math.sqrt(2.0 * math.log(ep))
    return routed_tokens * share + spread


def imbalance_factor(
    routed_tokens: float,
    n_experts: int,
    ep: int,
    zipf_s: float,
    redundant: int,
    experts_per_token: int = 1,
) -> float:
    """Busiest GPU's load over the mean GPU's load (1.0 = perfect balance)."""
    if routed_tokens <= 0:
        return 1.0
    busiest = busiest_gpu_tokens(routed_tokens, n_experts, ep, zipf_s, redundant, experts_per_token)
    return busiest / (routed_tokens / ep)
