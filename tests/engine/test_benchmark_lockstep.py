"""Why an unmixed engine keeps a closed-loop benchmark's users in lock-step, checked by hand.

Fixed lengths and all users sent at once (what aiperf's `--concurrency N` with fixed ISL/OSL
sends): when a prefill step runs nothing else (SGLang's default, `enable_mixed_chunk=False`),
the decode of the users prefilled first waits for the later prefills, so a wave's requests
finish in the same step and the next wave queues exactly as the first did. When prefill chunks
ride with the decodes (mixed), the first-prefilled user finishes first and the waves spread.
docs/serving-overheads.md gives what this does to the SGLang rows.
"""

from __future__ import annotations

import pytest

from sim.engine import simulate
from sim.metrics import summarize
from sim.specs import RunSpec, Slo
from sim.specs.workload import BenchmarkWorkload
from tests.builders import unit
from tests.engine.fixed_cost import FixedCost

SLO = Slo(ttft_s=1.0, tpot_s=1.0)


def _run(mixed: bool) -> tuple[list[float], list[float], float]:
    # step = 10 ms + 0.1 ms per prefill token: a 100-token prefill 20 ms, a decode step 10 ms;
    # the 100-token budget prefills one prompt per step
    cost = FixedCost(step_s=0.010, prefill_token_s=1e-4)
    w = BenchmarkWorkload.model_validate(
        {"kind": "benchmark", "input_tokens": 100, "output_tokens": 3, "num_prompts": 4,
         "max_concurrency": 2}
    )  # fmt: skip
    dep = unit(mixed_chunk=mixed, chunked_prefill_tokens=100)
    out = simulate(dep, lambda d: cost, w, RunSpec(seed=0))
    t = out.table
    b = summarize(out.record, SLO).benchmark
    assert b is not None and b.completed == 4
    return list(t.arrival_s[:4]), list(t.first_token_s[:4]), b.ttft.mean_ms


def test_unmixed_waves_repeat_the_first() -> None:
    # 0.000-0.020 prefill r0; 0.020-0.040 prefill r1 (r0 waits); two decode steps for both:
    # both done at 0.060, when r2 and r3 are sent and queue exactly as r0 and r1 did
    sent, first, ttft_ms = _run(mixed=False)
    assert sent == pytest.approx([0.0, 0.0, 0.060, 0.060])
    assert first == pytest.approx([0.020, 0.040, 0.080, 0.100])
    assert ttft_ms == pytest.approx((20 + 40 + 20 + 40) / 4)


def test_mixed_waves_spread_out() -> None:
    # 0.020-0.040 r1's prefill rides with r0's decode, so r0 ends a step ahead (0.050) and r2
    # is sent then; r1 ends at 0.070 with r2's prefill in its step, r3 is sent then and
    # finds no prompt ahead of it: the second wave's prompts no longer queue
    sent, first, ttft_ms = _run(mixed=True)
    assert sent == pytest.approx([0.0, 0.0, 0.050, 0.070])
    assert first == pytest.approx([0.020, 0.040, 0.070, 0.090])
    assert ttft_ms == pytest.approx((20 + 40 + 20 + 20) / 4)
