"""A vectorised stand-in for the serving cost model, for timing the engine alone
(`bench_engine.py --cost standin`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.cost.batch import BatchShape, OpTime, StepCost


@dataclass
class StandinCost:
    """Vectorised analytic step time for engine-only measurements.

    Once fitted to `ServingCostModel`'s decode steps for this deployment (4.5 ms + ~0.36 ms per
    request per rank); the cost model has changed since, and at 194 requests/s this stand-in now
    runs 8.4 ms steps at ~10 requests per rank (the real model: ~105 ms at ~97 after 600 s), so
    it times the engine in another regime. The real run's `split` line gives the engine's own
    CPU in the benchmark's regime. Per-rank attention reads each request's whole KV, so long
    contexts still make a rank the slowest.
    """

    kv_bytes_per_token: float = 71_424.0  # DeepSeek-V3 BF16 latent, 61 layers + the MTP layer
    kv_capacity_tokens_per_rank: int = 600_000
    state_tokens_per_request: int = 0
    hbm_bytes_s: float = 3.35e12
    fixed_s: float = 0.0045  # per-step floor: launches, EP dispatch/combine latency
    token_s: float = 1.48e-4  # routed experts + EP traffic per token per rank

    def step_cost(self, batch: BatchShape) -> StepCost:
        n = batch.num_ranks
        kv = np.bincount(batch.rank, weights=batch.kv_tokens, minlength=n)
        rank_s = kv * self.kv_bytes_per_token / self.hbm_bytes_s
        attn = float(rank_s.max())
        moe = self.fixed_s + self.token_s * float(batch.new_tokens.sum()) / n
        ops = {
            "attention": OpTime(seconds=attn, source="roofline"),
            "moe_and_ep": OpTime(seconds=moe, source="roofline"),
        }
        return StepCost(duration_s=attn + moe, rank_own_s=rank_s, ops=ops)
