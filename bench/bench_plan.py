"""Planner benchmark: a search of about a thousand candidates for one GPU type.

DeepSeek-V3 on H200, 2,000-token prompts, 200-token answers, p90 TTFT <= 2 s and TPOT <= 50 ms
at 20 req/s, over a wide space (nodes 1-2, attention TP 1/8, MoE EP or TP, both placements,
MTP 0/1, BF16/FP8 KV, TBO on/off, two chunk budgets, PD at three ratios, four
replica counts each). Prints the space size, what pruning removed, candidates per second, and
the simulated and wall time per probe. The aim (issue 23): within 5 minutes on 2 cores.

    python bench/bench_plan.py [--jobs 2] [--nodes 1] [--simulate-all]
"""

from __future__ import annotations

import argparse
import resource
import time

from sim.plan.planner import make_plan
from sim.plan.spec import PlanRequest
from sim.search.backends import ProcessBackend

REQUEST = {
    "model": "deepseek-v3", "gpus": ["h200"],
    "input": {"kind": "fixed", "tokens": 2000}, "output": {"kind": "fixed", "tokens": 200},
    "slo": {"ttft_s": 2.0, "tpot_s": 0.05, "percentile": 90}, "rate_req_s": 20.0,
    "space": {
        "nodes": [1, 2], "attn_tp": [1, 8], "moe": ["ep", "tp"], "placement": ["rank", "unit"],
        "mtp_draft_tokens": [0, 1], "kv_dtype": ["bf16", "fp8"],
        "two_batch_overlap": [False, True], "chunked_prefill_tokens": [4096, 8192],
        "max_running_requests": [256], "pd": True, "loads": 4,
    },
}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--nodes", default="1,2", help="nodes per unit (1: half the space)")
    ap.add_argument("--simulate-all", action="store_true", help="no dominance rule")
    args = ap.parse_args()
    space = {**REQUEST["space"], "nodes": [int(n) for n in args.nodes.split(",")]}
    req = PlanRequest.model_validate({**REQUEST, "space": space, "simulate_all": args.simulate_all})
    t0 = time.perf_counter()
    cpu0 = _cpu_s()
    with ProcessBackend(jobs=args.jobs) as backend:
        plan = make_plan(req, backend)
    wall = time.perf_counter() - t0
    cpu = _cpu_s() - cpu0  # this process and the pool's workers (ended when the pool closed)
    sims = [r for r in plan.rows if r["status"] == "simulated"]
    sim_s = sum(r["simulated_s"] for r in plan.rows)
    print(f"space: {plan.space_size} candidates; pruned {plan.removed}; simulated {plan.simulated}")
    print(f"wall {wall:.1f} s with {args.jobs} workers: {plan.space_size / wall:.2f} candidates/s, "
          f"{plan.simulated / wall:.2f} simulated/s")  # fmt: skip
    if plan.rows:
        print(f"simulated time per probe {sim_s / len(plan.rows):.0f} s (mean); wall per probe "
              f"{wall * args.jobs / len(plan.rows):.2f} worker-s; {len(sims)} ran, "
              f"{sum(r['slo_met'] for r in plan.rows)} met the SLO")  # fmt: skip
    print(f"CPU {cpu:.0f} s in all ({cpu / max(len(plan.rows), 1):.2f} CPU-s per probe): "
          f"{cpu / args.jobs:.0f} s of wall on {args.jobs} idle cores")  # fmt: skip
    print(f"verdict: {plan.verdict}")


def _cpu_s() -> float:
    """User + system CPU seconds of this process and its finished children (the workers): a
    figure a shared machine's load does not inflate, unlike wall time."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


if __name__ == "__main__":
    main()
