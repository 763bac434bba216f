"""The cost model alone: CPU per step of `ServingCostModel.step_cost` on the benchmark's batches.

`bench_engine.py` splits a run's CPU into engine and cost model, but on a shared machine one
run's split moves by 20-30%. This script runs `bench_engine`'s decode case (and its colocated
case) once, keeping the batches the engine handed the cost model (every `--every`-th decode
step, every colocated step), then prices them again with a fresh cost model:
once cold (every shape priced for the first time, as early in a run) and `--passes` times warm
(the memos filled, as in a long run's steady state), best pass kept. The batches are the same
for every build whose engine is unchanged, so builds compare on identical work; each case's
digest of the priced steps (duration, per-rank times, ops, overlap) is checked against
`bench/expected.json` (`--update` stores it after a change that moves prices on purpose).
A third case keeps every step of the decode unit over the colocated case's seconds (the same
arrivals, ~99 requests a rank against ~123: `bench_engine`'s `decode_short`), and the colocated
case's CPU per step is printed against it, cold and warm, from this one run. Figures are CPU
time (`time.process_time`).

    python bench/bench_cost.py                    # 600 s of decode, 60 s colocated
    python bench/bench_cost.py --duration-s 120 --passes 3
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from dataclasses import fields
from typing import Any

import numpy as np
from bench_engine import DEPLOYMENT, EXPECTED, real_cost, workload

from sim.cost.batch import BatchShape, StepCost
from sim.engine import simulate
from sim.engine.run import cycles_uncollected
from sim.specs import Deployment, RunSpec


class Keeping:
    """The real cost model, keeping every `every`-th batch it prices."""

    def __init__(self, cost: Any, every: int) -> None:
        self.cost, self.every, self.n = cost, every, 0
        self.kept: list[BatchShape] = []

    def step_cost(self, batch: BatchShape) -> StepCost:
        self.n += 1
        if self.n % self.every == 0:  # a decode-only step's columns are views into the
            # running set, valid only until the step is applied: kept as copies
            self.kept.append(kept_copy(batch))
        out: StepCost = self.cost.step_cost(batch)
        return out

    def __getattr__(self, name: str) -> Any:  # capacity, KV bytes: the model's own
        return getattr(self.cost, name)


def kept_copy(b: BatchShape) -> BatchShape:
    """`b` with its own copy of every column."""
    own = {f.name: getattr(b, f.name) for f in fields(b)}
    for name, v in own.items():
        if isinstance(v, np.ndarray):
            own[name] = v.copy()
    return BatchShape(**own)


def step_digest(h: Any, s: StepCost) -> None:
    """Add one priced step to hash `h`: its duration, per-rank times, ops and overlap."""
    h.update(np.float64(s.duration_s).tobytes() + np.float64(s.overlap_saved_s).tobytes())
    h.update(np.ascontiguousarray(s.rank_own_s, dtype=np.float64).tobytes())
    for name in sorted(s.ops):
        t = s.ops[name]
        h.update(f"{name}:{t.source}:{t.extrapolated}".encode())
        h.update(np.float64(t.seconds).tobytes())


def price(d: Deployment, batches: list[BatchShape], passes: int) -> tuple[float, float, str]:
    """Cold and best warm CPU per step (us) over `batches`, and the cold pass's digest. The
    cyclic garbage collector is paused as a simulation pauses it (`cycles_uncollected`): left
    on, it walks the growing memos again and again and its time lands on the pricing."""
    with cycles_uncollected():
        return _price(d, batches, passes)


def _price(d: Deployment, batches: list[BatchShape], passes: int) -> tuple[float, float, str]:
    cost, h = real_cost(d), hashlib.sha256()
    c0 = time.process_time()
    for b in batches:
        step_digest(h, cost.step_cost(b))
    cold = (time.process_time() - c0) / len(batches) * 1e6
    warm = []
    for _ in range(passes):
        c0 = time.process_time()
        for b in batches:
            cost.step_cost(b)
        warm.append((time.process_time() - c0) / len(batches) * 1e6)
    return cold, min(warm, default=float("nan")), h.hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration-s", type=float, default=600.0, help="decode case, simulated")
    ap.add_argument("--colocated-s", type=float, default=60.0, help="colocated case (0: none)")
    ap.add_argument("--every", type=int, default=25, help="keep every n-th decode step")
    ap.add_argument("--passes", type=int, default=5, help="warm passes (best is kept)")
    ap.add_argument("--update", action="store_true", help="store this run's digests")
    args = ap.parse_args()
    wl = workload(194.0, 1600.0)
    cases: list[tuple[str, Deployment, list[BatchShape]]] = []
    for name, dur, every in (("decode", args.duration_s, args.every),
                             ("colocated", args.colocated_s, 1),
                             ("decode_short", args.colocated_s, 1)):  # fmt: skip
        if dur <= 0:
            continue
        d = DEPLOYMENT
        if name == "colocated":
            d = DEPLOYMENT.model_copy(update={"name": "dp144_ep144_colocated", "role": "colocated"})
        keep = Keeping(real_cost(d), every)
        run = RunSpec(duration_s=dur, warmup_s=min(300.0, dur / 4))
        simulate(d, lambda _, k=keep: k, wl, run)
        cases.append((name, d, keep.kept))
    key = f"cost:{args.duration_s:g}s/{args.every}:colocated{args.colocated_s:g}s"
    stored = json.loads(EXPECTED.read_text()) if EXPECTED.exists() else {}
    ok = True
    per_step: dict[str, tuple[float, float]] = {}
    for name, d, batches in cases:
        cold, warm, got = price(d, batches, args.passes)
        per_step[name] = (cold, warm)
        segs = sum(b.size for b in batches) / len(batches)
        print(f"[{name:12}] {len(batches):,} steps ({segs:,.0f} segments each): cold "
              f"{cold:,.0f} us per step, warm {warm:,.0f} us per step (best of "
              f"{args.passes}); digest {got}")  # fmt: skip
        want = stored.get(key, {}).get(name)
        if args.update:
            stored.setdefault(key, {})[name] = got
        elif want is None:
            print(f"stored digest        : none for {key}/{name} (run with --update)")
        else:
            print(f"stored digest        : {name} {'identical' if want == got else 'DIFFERS'}")
            ok = ok and want == got
    if "colocated" in per_step and "decode_short" in per_step:
        (c_cold, c_warm), (d_cold, d_warm) = per_step["colocated"], per_step["decode_short"]
        print(f"colocated / decode_short: cold {c_cold / d_cold:.1f}x, warm {c_warm / d_warm:.1f}x "
              "cost-model CPU per step (the decode unit over the same seconds)")  # fmt: skip
    if args.update:
        EXPECTED.write_text(json.dumps(stored, indent=2, sort_keys=True) + "\n")
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
