"""Engine benchmark: one simulated hour of a DeepSeek-V3 decode unit, DP144 attention + EP144.

18 H800 nodes (144 GPUs) serve decode only (requests arrive with their prompt's KV, as in a PD
decode pool), MTP with one draft token, 194 requests/s (~700k in the hour), answers of 1,600
tokens on average: about three quarters of the ranks' batch slots full (mean decode batch /
max running requests) on the default `h800-roofline` profile.

A second, shorter case runs the same unit colocated for ten simulated minutes (prompts
prefilled on the decode ranks, in chunks mixed into decode steps), and a third the decode unit
over the same minutes (`decode_short`: the same arrivals, ~99 requests a rank against the
colocated case's ~123). The colocated target compares a step with a decode-only step at the
same batch: the decode hour's (~122 a rank) is that one; `decode_short` is the same minutes and
arrivals at a smaller batch. Both ratios are printed. Each case's CPU per step is given
over all its steps and over their later half (from the middle step's pricing to the last one's:
memos filled, the run's closing checks left out), the per-step cost the colocated target is
about; the first minute alone, all memos cold, is a few dozen steps of many prefilling ranks
(`--colocated-s 60`). All figures are CPU
time (`time.process_time`; wall time beside it): per step, per request-step (one request advanced
by one step), and simulated requests per CPU-second. The bare-simpy figure is the CPU per event
of a loop doing nothing but timeouts, over at least a million events, against the engine's CPU
per event (one event is one batched forward step of the whole unit). Each case's figures
(counts, step time, TPOT) are checked against `bench/expected.json`: a change that should leave
results identical must print "identical" (`--update` stores a new summary after a change that
moves results on purpose).

    python bench/bench_engine.py                  # engine + the real cost model (sim.cost.serving)
    python bench/bench_engine.py --cost standin   # engine alone, with a vectorised stand-in
    python bench/bench_engine.py --repeat 3       # each case 3 times: the fastest, the spread
    python bench/bench_engine.py --instructions   # and the colocated ratio in instructions

Run on one core (`taskset -c 0`) for the figure the README quotes. On a shared machine the same
code's CPU per step varies by up to a fifth between runs, so compare two versions by the
fastest of several interleaved runs (`--repeat`), never by one run each; repeats must simulate
identical results, or the bench stops.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import simpy

from sim.catalog import load_gpu, load_model
from sim.cost.batch import BatchShape, StepCost
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


def real_cost(d: Deployment) -> Any:
    """The cost model a scenario without `profile:` gets: H800 on its `h800-roofline` profile."""
    from sim.catalog.profiles import load_profile
    from sim.cost.serving import ServingCostModel

    profile = load_profile("h800-roofline")
    return ServingCostModel(load_model("deepseek-v3"), load_gpu("h800"), d, profile)


EXPECTED = Path(__file__).with_name("expected.json")


class TimedCost:
    """A cost model wrapped to count the CPU its `step_cost` calls take (the rest is engine);
    with `mark`, it is called before pricing the steps of the indices `mark_at` (0-based)."""

    def __init__(
        self,
        cost: Any,
        mark_at: frozenset[int] = frozenset(),
        mark: Callable[[], None] | None = None,
    ) -> None:
        self.cost, self.cpu_s = cost, 0.0
        self.marks: list[float] = []  # the process's CPU clock as each step is priced
        self.mark_at, self.mark = mark_at, mark

    def step_cost(self, batch: BatchShape) -> StepCost:
        if self.mark is not None and len(self.marks) in self.mark_at:
            self.mark()
        c0 = time.process_time()
        self.marks.append(c0)
        out = self.cost.step_cost(batch)
        self.cpu_s += time.process_time() - c0
        return out  # type: ignore[no-any-return]

    @staticmethod
    def later_half(steps: int) -> tuple[int, int]:
        """The indices of the steps a run of `steps` steps' later half runs between: from the
        middle step's pricing to the last one's (it spans their difference in steps)."""
        return steps // 2, steps - 1

    def later_half_us_per_step(self) -> float:
        """CPU per step, engine and cost model, over the run's later half of steps: from the
        middle step's pricing to the last one's, without the start (memos filling) and without
        the end (the run's closing checks and summary)."""
        half, last = self.later_half(len(self.marks))
        steps = last - half
        return (self.marks[last] - self.marks[half]) / steps * 1e6 if steps > 0 else 0.0

    def __getattr__(self, name: str) -> Any:  # capacity, KV bytes, memory plan: the model's own
        return getattr(self.cost, name)


def digest(out: Any) -> str:
    """SHA-256 of every step's start and duration and every request's rank, tokens and times:
    any change in what the run did changes it."""
    log, t = out.cluster.pools[0].log, out.table
    n = t.size
    h = hashlib.sha256()
    for a in (log.column("start_s"), log.column("duration_s"), log.column("output_tokens"),
              t.home_rank[:n], t.generated[:n], t.first_token_s[:n], t.finish_s[:n]):  # fmt: skip
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def bare_simpy_cpu_s(events: int) -> float:
    """CPU seconds for a simpy loop that processes `events` timeouts and does nothing else."""
    env = simpy.Environment()

    def loop() -> Any:
        for _ in range(events):
            yield env.timeout(0.05)

    env.process(loop())
    c0 = time.process_time()
    env.run()
    return time.process_time() - c0


@dataclass(frozen=True)
class CaseResult:
    """One simulated case: what it simulated and the CPU it took."""

    name: str
    summary: dict[str, Any]  # the figures the stored summary holds
    cpu_s: float
    cost_cpu_s: float  # of cpu_s, inside the cost model's step_cost
    wall_s: float
    steps: int
    events: int
    request_steps: int  # sum over steps of the requests a step advanced (decode + prefill)
    batch_per_rank: float
    later_us_per_step: float  # CPU per step over the later half of the steps (`TimedCost`)

    @property
    def cpu_us_per_step(self) -> float:
        return self.cpu_s / max(self.steps, 1) * 1e6


def run_case(name: str, d: Deployment, cost_kind: str, rate: float, output_mean: float,
             duration_s: float, warmup_s: float, mark_at: frozenset[int] = frozenset(),
             mark: Callable[[], None] | None = None) -> CaseResult:  # fmt: skip
    model = real_cost(d) if cost_kind == "real" else _sibling("standin_cost").StandinCost()
    cost = TimedCost(model, mark_at, mark)
    run = RunSpec(duration_s=duration_s, warmup_s=min(warmup_s, duration_s / 4))
    t0, c0 = time.perf_counter(), time.process_time()
    out = simulate(d, lambda _: cost, workload(rate, output_mean), run)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    res = summarize(out.record, Slo(ttft_s=2.0, tpot_s=0.1))
    log = out.cluster.pools[0].log
    steps = log.n
    summary = {
        "arrived": out.counts.arrived,
        "completed": out.counts.completed,
        "steps": steps,
        "output_tokens": int(log.column("output_tokens").sum()),
        "simulated_end_s": round(out.end_s, 6),
        "step_time_ms": round((res.step_time_s or 0.0) * 1e3, 6),
        "tpot_p50_ms": round((res.tpot_s.p50 or 0.0) * 1e3, 6),
        "digest": digest(out),
    }
    return CaseResult(
        name=name, summary=summary, cpu_s=cpu, cost_cpu_s=cost.cpu_s, wall_s=wall, steps=steps,
        events=out.events,
        request_steps=int(log.column("segments").sum()),
        batch_per_rank=float(log.column("segments").sum()) / max(steps, 1) / d.attn_dp,
        later_us_per_step=cost.later_half_us_per_step(),
    )  # fmt: skip


def summary_diff(want: dict[str, Any], got: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The figures of `got` that differ from `want`: (wanted, got) by name."""
    return {k: (want.get(k), v) for k, v in got.items() if want.get(k) != v}


def fastest(runs: list[CaseResult]) -> CaseResult:
    """The run of one case with the least CPU, after checking that every run simulated the same
    (a case is deterministic: repeats differ in CPU time only)."""
    for r in runs[1:]:
        if diff := summary_diff(runs[0].summary, r.summary):
            raise SystemExit(f"{r.name}: repeated runs simulated different results {diff}")
    return min(runs, key=lambda r: r.cpu_s)


def spread(runs: list[CaseResult]) -> str:
    """The CPU per step of a case's repeats, fastest to slowest (empty for one run)."""
    if len(runs) < 2:
        return ""
    us = sorted(r.cpu_us_per_step for r in runs)
    low, high, median = us[0], us[-1], statistics.median(us)
    return f"; {len(runs)} runs {low:,.0f}-{high:,.0f} us per step, median {median:,.0f}"


def check_stored(results: list[CaseResult], key: str, update: bool) -> bool:
    """Compare each case's summary with the stored one (`--update` rewrites it)."""
    stored = json.loads(EXPECTED.read_text()) if EXPECTED.exists() else {}
    if update:
        stored[key] = {r.name: r.summary for r in results}
        EXPECTED.write_text(json.dumps(stored, indent=2, sort_keys=True) + "\n")
        print(f"stored summary       : written to {EXPECTED.name} [{key}]")
        return True
    ok = True
    for r in results:
        want = stored.get(key, {}).get(r.name)
        if want is None:
            print(f"stored summary       : none for {key}/{r.name} (run with --update)")
            continue
        diff = summary_diff(want, r.summary)
        verdict = "identical" if not diff else f"DIFFERS {diff}"
        print(f"stored summary       : {r.name} {verdict}")
        ok = ok and not diff
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cost", choices=("real", "standin"), default="real")
    ap.add_argument("--duration-s", type=float, default=3600.0)
    ap.add_argument("--rate", type=float, default=194.0, help="requests per second")
    ap.add_argument("--output-mean", type=float, default=1600.0, help="mean answer, tokens")
    ap.add_argument("--warmup-s", type=float, default=300.0)
    ap.add_argument("--colocated-s", type=float, default=600.0,
                    help="simulated seconds of the colocated case (0 skips it)")  # fmt: skip
    ap.add_argument("--bare-events", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each case this many times, interleaved, each with a new cost "
                         "model; report the fastest and the spread")  # fmt: skip
    ap.add_argument("--update", action="store_true", help="store this run's summaries")
    ap.add_argument("--instructions", action="store_true",
                    help="also count the instructions of each case's steps under callgrind "
                         "(the later halves; the decode hour's last 1,000 steps) and print the "
                         "colocated ratios (valgrind; about six minutes)")  # fmt: skip
    ap.add_argument("--callgrind-child", help=argparse.SUPPRESS)  # each case's steps, "N,M,K"
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error(f"--repeat must be at least 1, got {args.repeat}")
    if args.instructions and args.colocated_s <= 0:
        ap.error("--instructions counts the colocated case: give --colocated-s above 0")
    plan = [("decode", DEPLOYMENT, args.duration_s, args.warmup_s)]
    if args.colocated_s > 0:
        colocated = DEPLOYMENT.model_copy(update={"name": "dp144_ep144_colocated",
                                                  "role": "colocated"})  # fmt: skip
        plan.append(("colocated", colocated, args.colocated_s, args.colocated_s / 4))
        # the decode unit over the same first seconds: the same arrivals, a smaller batch
        plan.append(("decode_short", DEPLOYMENT, args.colocated_s, args.colocated_s / 4))
    if args.callgrind_child:  # under callgrind: each case's counted steps between marks
        callgrind = _sibling("callgrind")
        for (name, d, duration_s, warmup_s), steps in zip(
            plan, map(int, args.callgrind_child.split(",")), strict=True
        ):
            at = frozenset(counted_steps(name, steps))
            run_case(name, d, args.cost, args.rate, args.output_mean, duration_s, warmup_s, at,
                     callgrind.Window())  # fmt: skip
        return
    runs: dict[str, list[CaseResult]] = {name: [] for name, *_ in plan}
    for _ in range(args.repeat):  # interleaved: a slow spell of the machine hits every case
        for name, d, duration_s, warmup_s in plan:
            runs[name].append(run_case(name, d, args.cost, args.rate, args.output_mean,
                                       duration_s, warmup_s))  # fmt: skip
    cases = [fastest(runs[name]) for name, *_ in plan]
    decode = cases[0]
    bare_n = max(args.bare_events, decode.events)
    bare_us = bare_simpy_cpu_s(bare_n) / bare_n * 1e6
    print(f"cost model           : {args.cost}; DeepSeek-V3 on 18 x 8 H800, {DEPLOYMENT.layout}")
    for r in cases:
        s = r.summary
        print(f"[{r.name:9}] simulated : {s['simulated_end_s']:.0f} s, {s['arrived']:,} arrived, "
              f"{s['completed']:,} completed, {r.steps:,} steps, step {s['step_time_ms']:.1f} ms, "
              f"batch/rank {r.batch_per_rank:.1f}")  # fmt: skip
        print(f"[{r.name:9}] CPU       : {r.cpu_s:.2f} s (wall {r.wall_s:.2f} s); "
              f"{r.cpu_us_per_step:,.0f} us per step, "
              f"{r.cpu_s / max(r.request_steps, 1) * 1e9:,.0f} ns per request-step, "
              f"{s['completed'] / max(r.cpu_s, 1e-9):,.0f} requests per CPU-second"
              f"{spread(runs[r.name])}")  # fmt: skip
        eng = r.cpu_s - r.cost_cpu_s
        print(f"[{r.name:9}] split     : engine {eng / max(r.steps, 1) * 1e6:,.0f} us per step "
              f"({eng / max(r.request_steps, 1) * 1e9:,.0f} ns per request-step), cost model "
              f"{r.cost_cpu_s / max(r.steps, 1) * 1e6:,.0f} us per step")  # fmt: skip
        print(f"[{r.name:9}] later half: {r.later_us_per_step:,.0f} us per step (the later half "
              "of the steps: memos filled, closing checks left out)")  # fmt: skip
    if len(cases) > 1:
        coloc, short = cases[1], cases[2]
        for name, base in (("decode", decode), ("decode_short", short)):
            print(f"colocated / {name:12}: {coloc.cpu_us_per_step / base.cpu_us_per_step:.1f}x "
                  f"CPU per step, {coloc.later_us_per_step / base.later_us_per_step:.1f}x over "
                  f"the later halves (batch/rank {coloc.batch_per_rank:.1f} vs "
                  f"{base.batch_per_rank:.1f}; target <= 2x at the same batch)")  # fmt: skip
    print(f"bare simpy           : {bare_us:.2f} us CPU per event over {bare_n:,} events; the "
          f"engine spends {decode.cpu_s / decode.events * 1e6:,.0f} us per event (one event is "
          f"one forward step of the whole unit): "
          f"{decode.cpu_s / decode.events * 1e6 / bare_us:,.0f}x a bare event, "
          f"{decode.cpu_s / max(decode.request_steps, 1) * 1e6 / bare_us:.2f}x per "
          "request-step")  # fmt: skip
    key = f"{args.cost}:{args.duration_s:g}s@{args.rate:g}/s:colocated{args.colocated_s:g}s"
    if not check_stored(cases, key, args.update):
        raise SystemExit(1)
    if args.instructions:
        instructions(args, cases)


# the decode hour's last steps, counted under callgrind (its 16k-step later half takes 20 min)
DECODE_COUNTED_STEPS = 1_000


def counted_steps(name: str, steps: int) -> tuple[int, int]:
    """The indices of the steps whose pricing a case's counted instructions run between: its
    later half (`TimedCost.later_half`), or for the decode hour its last `DECODE_COUNTED_STEPS`."""
    half, last = TimedCost.later_half(steps)
    return (max(half, last - DECODE_COUNTED_STEPS), last) if name == "decode" else (half, last)


def _sibling(name: str) -> Any:
    """A module of this script's folder (`callgrind`, `standin_cost`), wherever this runs from."""
    if (here := str(Path(__file__).resolve().parent)) not in sys.path:  # once, not per call
        sys.path.insert(0, here)
    return importlib.import_module(name)


def instructions(args: argparse.Namespace, cases: list[CaseResult]) -> None:
    """Print each case's instructions per step over its counted steps (`counted_steps`: the
    colocated and decode_short later halves, the decode hour's last steps), counted in a
    child under callgrind, and the colocated target's ratios: a figure that repeats to about
    0.1% where this machine's CPU time moves by a fifth."""
    callgrind = _sibling("callgrind")
    if not callgrind.available():
        print("instructions         : valgrind is not installed (apt install valgrind)")
        return
    print("instructions         : counting each case's steps under callgrind (about six minutes)",
          flush=True)  # fmt: skip
    argv = [
        __file__, "--callgrind-child", ",".join(str(c.steps) for c in cases),
        "--cost", args.cost, "--rate", str(args.rate), "--output-mean", str(args.output_mean),
        "--duration-s", str(args.duration_s), "--warmup-s", str(args.warmup_s),
        "--colocated-s", str(args.colocated_s),
    ]  # fmt: skip
    # parts: each case's counted steps, and between them the (uninstrumented) rest
    counted = callgrind.count(argv, 2 * len(cases) - 1, from_start=False)[::2]
    per_step = {}
    for n, case in zip(counted, cases, strict=True):
        first, last = counted_steps(case.name, case.steps)
        per_step[case.name] = n / max(last - first, 1)
        what = "later half" if case.name != "decode" else f"last {last - first:,} steps"
        print(f"[{case.name:9}] {what}: {per_step[case.name] / 1e6:,.3f} M instructions per step")
    coloc = next(c for c in cases if c.name == "colocated")
    for base in (c for c in cases if c.name != "colocated"):
        print(f"colocated / {base.name:12}: {per_step['colocated'] / per_step[base.name]:.2f}x "
              f"instructions per step (batch/rank {coloc.batch_per_rank:.1f} vs "
              f"{base.batch_per_rank:.1f}; target <= 2x at the same batch)")  # fmt: skip


if __name__ == "__main__":
    main()
