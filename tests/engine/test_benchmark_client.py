"""The benchmark client against a fixed-cost engine: semaphore, warm-up and the clients' metrics,
checked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from sim.engine import simulate
from sim.engine.benchmark_feed import BenchmarkFeed
from sim.engine.requests import RequestTable
from sim.metrics import summarize
from sim.specs import RunSpec, Slo
from sim.specs.workload import BenchmarkWorkload
from tests.builders import unit
from tests.engine.fixed_cost import FixedCost

SLO = Slo(ttft_s=1.0, tpot_s=1.0)


def bench(**kw: object) -> BenchmarkWorkload:
    fields: dict[str, object] = {"kind": "benchmark", "input_tokens": 100, "output_tokens": 3}
    return BenchmarkWorkload.model_validate(fields | kw)


def test_warmup_then_semaphore_exact_timeline() -> None:
    # step = 10 ms + 0.1 ms per prefill token; one warm-up, then 3 prompts through 2 slots
    cost = FixedCost(step_s=0.010, prefill_token_s=1e-4)
    w = bench(num_prompts=3, max_concurrency=2, warmup_requests=1)
    out = simulate(unit(), lambda d: cost, w, RunSpec(seed=0))
    t = out.table
    # warm-up alone: prefill 20 ms (first token 0.020), two decode steps -> done at 0.040; the
    # benchmark starts then and sends b0, b1 (both slots); b2 waits for a slot
    # 0.040: prefill b0 + b1 (200 tokens, 30 ms) -> first tokens 0.070; done at 0.090
    # 0.090: b2 sent; prefill 20 ms -> 0.110; done at 0.130
    assert t.arrival_s[:4] == pytest.approx([0.0, 0.040, 0.040, 0.090])
    assert t.first_token_s[:4] == pytest.approx([0.020, 0.070, 0.070, 0.110])
    assert t.finish_s[:4] == pytest.approx([0.040, 0.090, 0.090, 0.130])
    b = summarize(out.record, SLO).benchmark
    assert b is not None
    assert b.completed == 3 and b.failed == 0
    assert b.duration_s == pytest.approx(0.090)  # benchmark start 0.040 to last end 0.130
    assert b.ttft.mean_ms == pytest.approx((30 + 30 + 20) / 3)
    assert b.ttft.median_ms == pytest.approx(30)
    assert b.e2e.mean_ms == pytest.approx((50 + 50 + 40) / 3)
    # TPOT per request = (E2E - TTFT) / (output - 1) = 10 ms for each, then averaged
    assert b.tpot.mean_ms == pytest.approx(10.0)
    assert b.itl.mean_ms == pytest.approx(10.0)  # every gap is one 10 ms decode step
    assert b.output_throughput_tok_s == pytest.approx(9 / 0.090)
    assert b.total_input_tokens == 300 and b.total_output_tokens == 9
    assert b.request_throughput_req_s == pytest.approx(3 / 0.090)


def test_tpot_is_averaged_per_request_not_per_token() -> None:
    # two prompts at once, outputs 2 and 5 tokens (range via different output lengths):
    # a shared 10 ms decode step, so TPOT is 10 ms for both; but the first, shorter output's
    # TTFT equals the second's, so (E2E - TTFT) / (out - 1) is checked against the timeline
    cost = FixedCost(step_s=0.010, prefill_token_s=0.0)
    w = bench(num_prompts=2, output_tokens=4, range_ratio=0.5)  # outputs uniform in [2, 4]
    out = simulate(unit(), lambda d: cost, w, RunSpec(seed=3))
    t = out.table
    lat_ttft = t.first_token_s[:2] - t.arrival_s[:2]
    lat_e2e = t.finish_s[:2] - t.arrival_s[:2]
    outs = t.output_tokens[:2]
    b = summarize(out.record, SLO).benchmark
    assert b is not None
    want = np.mean((lat_e2e - lat_ttft) / (outs - 1))
    assert b.tpot.mean_ms == pytest.approx(want * 1e3)
    assert b.ttft.mean_ms == pytest.approx(10.0)  # one 10 ms prefill step for both


def test_no_limit_sends_every_prompt_at_once() -> None:
    cost = FixedCost(step_s=0.010)
    out = simulate(unit(), lambda d: cost, bench(num_prompts=5), RunSpec(seed=0))
    assert np.all(out.table.arrival_s[:5] == 0.0)
    assert out.table.size == 5


def test_poisson_rate_spaces_the_sends() -> None:
    feed = BenchmarkFeed(bench(num_prompts=50, request_rate=10.0), np.random.default_rng(1))
    assert feed.offsets[0] == 0.0
    assert np.all(np.diff(feed.offsets) > 0)
    assert np.mean(np.diff(feed.offsets)) == pytest.approx(0.1, rel=0.35)  # 1 / rate


def test_client_latency_delays_the_engine_and_the_client() -> None:
    feed = BenchmarkFeed(
        bench(num_prompts=1), np.random.default_rng(0), ingress_s=0.005, egress_s=0.002
    )
    assert feed.next_time() == pytest.approx(0.005)  # the engine sees it 5 ms after the send
    table = RequestTable()
    ids, _ = feed.pop_until(0.004, table)
    assert ids.shape[0] == 0
    ids, _ = feed.pop_until(0.005, table)
    assert list(ids) == [0] and table.arrival_s[0] == 0.0  # TTFT counts from the send


def test_length_ranges_follow_each_client() -> None:
    sg = bench(num_prompts=1, input_tokens=1000, range_ratio=0.25)
    assert (sg.input.min_tokens, sg.input.max_tokens) == (250, 1000)
    vl = bench(num_prompts=1, input_tokens=1000, range_ratio=0.25, range_convention="vllm")
    assert (vl.input.min_tokens, vl.input.max_tokens) == (750, 1250)
    with pytest.raises(ValueError, match="range_ratio must be below 1"):
        bench(num_prompts=1, range_convention="vllm")


@pytest.mark.parametrize(
    ("engine", "path_ms"), [("sglang", 9.54 - 2.632), ("vllm", 0.0), ("trtllm", 0.0), (None, 0.0)]
)
def test_the_engines_request_path_counts_in_the_clients_ttft(
    engine: str | None, path_ms: float
) -> None:
    """With `request_path: engine`, SGLang's serving path outside the forward passes (its TTFT
    over a mock forward less the forward, tenstorrent/tt-inference-server#3560) lies between the
    send and the engine; the engines without such a measurement add none, and by default no
    engine does. Against a fixed-cost engine: a lone 100-token prompt prefills in one 20 ms
    step."""
    cost = FixedCost(step_s=0.010, prefill_token_s=1e-4)
    for path, ms in (("engine", path_ms), ("none", 0.0)):
        w = bench(num_prompts=1, request_path=path)
        out = simulate(unit(engine=engine), lambda d: cost, w, RunSpec(seed=0))
        t = out.table
        assert t.arrival_s[0] == 0.0  # the send
        assert t.first_token_s[0] == pytest.approx(ms * 1e-3 + 0.020)
        b = summarize(out.record, SLO).benchmark
        assert b is not None and b.ttft.mean_ms == pytest.approx(ms + 20.0)
