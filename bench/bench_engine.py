"""Engine benchmark: one simulated hour of a DeepSeek-V3 decode unit, DP144 attention + EP144.

18 H800 nodes (144 GPUs) serve decode only (requests arrive with their prompt's KV, as in a PD
decode pool), MTP with one draft token, 194 requests/s (~700k in the hour), answers of 1,600
tokens on average: about three quarters of the ranks' batch slots full (mean decode batch /
max running requests) on the default `h800-roofline` profile. Prints
simulated requests and simpy events per wall second, and the same event rate for a bare simpy
loop of the same number of events measured in the same process (the ratio is the engine's work
per event: each event is one batched forward step of the whole unit).

    python bench/bench_engine.py                  # engine + the real cost model (sim.cost.serving)
    python bench/bench_engine.py --cost standin   # engine alone, with a vectorised stand-in

Run on one core (`taskset -c 0`) for the figure the README quotes.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from sim.catalog import load_gpu, load_model
from sim.cost.batch import BatchShape, OpTime, StepCost
from sim.engine import simulate
from sim.metrics import summarize
from sim.specs import Deployment, PoissonWorkload, RunSpec, Slo

DEPLOYMENT = Deployment(
    name="dp144_ep144",
    nodes=18,
    gpus_per_node=8,
    attn_tp=1,
    moe_ep=144,
    role="decode",
    max_running_requests=128,
    mtp_draft_tokens=1,
    mtp_acceptance=(0.8,),
    eplb_redundant_experts=32,
    two_batch_overlap=True,
)


def workload(rate_req_s: float, output_mean_tokens: float) -> PoissonWorkload:
    return PoissonWorkload(
        kind="poisson",
        rate_req_s=rate_req_s,
        input={"kind": "lognormal", "mean_tokens": 2000, "sigma": 0.5, "max_tokens": 16000},
        output={
            "kind": "lognormal",
            "mean_tokens": output_mean_tokens,
            "sigma": 0.5,
            "max_tokens": 12000,
        },
    )


@dataclass
class StandinCost:
    """Vectorised analytic step time for engine-only measurements.

    Fitted to `ServingCostModel`'s decode steps for this deployment (roofline, H800, TBO, EPLB):
    4.5 ms + ~0.36 ms per request per rank between 20 and 128 requests per rank; per-rank
    attention reads each request's whole KV, so long contexts still make a rank the slowest.
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
        return StepCost(duration_s=attn + moe, rank_attention_s=rank_s, ops=ops)


def real_cost(d: Deployment) -> Any:
    """The cost model a scenario without `profile:` gets: H800 on its `h800-roofline` profile."""
    from sim.catalog.profiles import load_profile
    from sim.cost.serving import ServingCostModel

    profile = load_profile("h800-roofline")
    return ServingCostModel(load_model("deepseek-v3"), load_gpu("h800"), d, profile)


def bare_simpy(events: int, dt: float) -> float:
    """Wall seconds for a simpy loop that processes `events` timeouts and nothing else."""
    env = simpy.Environment()

    def loop() -> Any:
        for _ in range(events):
            yield env.timeout(dt)

    env.process(loop())
    t0 = time.perf_counter()
    env.run()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cost", choices=("real", "standin"), default="real")
    ap.add_argument("--duration-s", type=float, default=3600.0)
    ap.add_argument("--rate", type=float, default=194.0, help="requests per second")
    ap.add_argument("--output-mean", type=float, default=1600.0, help="mean answer, tokens")
    ap.add_argument("--warmup-s", type=float, default=300.0)
    args = ap.parse_args()
    cost = real_cost(DEPLOYMENT) if args.cost == "real" else StandinCost()
    run = RunSpec(duration_s=args.duration_s, warmup_s=min(args.warmup_s, args.duration_s / 4))
    t0, c0 = time.perf_counter(), time.process_time()
    out = simulate(DEPLOYMENT, lambda d: cost, workload(args.rate, args.output_mean), run)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    res = summarize(out, Slo(ttft_s=2.0, tpot_s=0.1))
    bare = bare_simpy(out.events, 0.05)
    pool = out.cluster.pools[0]
    busy = (res.decode_batch_per_rank or 0.0) / DEPLOYMENT.max_running_requests
    print(f"cost model           : {args.cost} ({res.profile})")
    print(f"simulated            : {args.duration_s:.0f} s, {out.counts.arrived:,} requests "
          f"arrived, {out.counts.completed:,} completed, {pool.log.n:,} steps")  # fmt: skip
    print(f"load                 : decode batch/rank {res.decode_batch_per_rank:.1f} of "
          f"{DEPLOYMENT.max_running_requests} ({busy:.0%} full), step {res.step_time_s * 1e3:.1f}"
          f" ms, TPOT p50 {res.tpot_s.p50 * 1e3:.1f} ms, MTP accept {res.mtp_accept_len:.2f}")  # type: ignore[operator]  # fmt: skip
    print(f"wall                 : {wall:.1f} s (CPU {cpu:.1f} s)")
    print(f"engine               : {out.counts.completed / wall:,.0f} simulated requests/s, "
          f"{out.events / wall:,.0f} events/s ({out.events:,} events)")  # fmt: skip
    print(f"bare simpy loop      : {out.events / bare:,.0f} events/s ({bare:.2f} s for the same "
          f"events); engine overhead {wall / bare:.0f}x")  # fmt: skip


if __name__ == "__main__":
    main()
