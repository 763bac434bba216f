"""What the results view and the memory view show, from the simulator's own figures: the step
breakdown's source labels (extrapolation included), the distinct-KV card, the memory fit."""

from __future__ import annotations

import pytest

from app import memory_view, results_view
from app.units import ms
from sim.catalog import load_gpu, load_model
from sim.cost.memory import plan_memory
from sim.io.scenario_io import parse_scenario
from sim.metrics import Results
from sim.run import run_scenario
from sim.specs import Deployment

SCENARIO = """\
name: labels
model: deepseek-v3
gpu: h200
profile: h800-published
deployments:
  - {name: dp8_ep8, attn_tp: 1, moe_ep: 8}
  - {name: tp8, attn_tp: 8, moe_tp: 8}
workload:
  kind: closed
  concurrency: 32
  input: {kind: fixed, tokens: 1000}
  output: {kind: fixed, tokens: 20}
slo: {ttft_s: 1.0, tpot_s: 0.1, percentile: 90}
run: {duration_s: 2, warmup_s: 0.2, seed: 1}
"""


@pytest.fixture(scope="module")
def results() -> Results:
    return run_scenario(parse_scenario(SCENARIO))


def test_breakdown_labels_say_published_and_extrapolated(results: Results) -> None:
    d = results.deployments[0]
    labels = results_view.op_sources(results.model_copy(update={"deployments": [d]}))
    assert d.extrapolated_ops  # H800 tables priced on an H200
    for op in d.extrapolated_ops:
        assert labels[op] == f"{d.step_sources[op]}, extrapolated"
    roofline = [op for op, src in d.step_sources.items() if src == "roofline"]
    assert roofline and all(labels[op] == "roofline" for op in roofline)


def test_breakdown_labels_name_deployments_when_only_some_extrapolate(results: Results) -> None:
    first, second = results.deployments
    op = next(o for o in first.extrapolated_ops if first.step_sources[o] == second.step_sources[o])
    rest = [o for o in second.extrapolated_ops if o != op]
    mixed = results.model_copy(
        update={"deployments": [first, second.model_copy(update={"extrapolated_ops": rest})]}
    )
    want = f"{first.step_sources[op]}, extrapolated in dp8_ep8"
    assert results_view.op_sources(mixed)[op] == want
    assert results_view.op_sources(results)[op] == f"{first.step_sources[op]}, extrapolated"


def test_kv_card_is_the_results_distinct_capacity(results: Results) -> None:
    values = results_view.card_values(results)
    for d, v in zip(results.deployments, values, strict=True):
        assert v["KV tokens (distinct)"] == d.kv_capacity_tokens_total
        assert v["TTFT p90 ms"] == ms(d.ttft_s.p90)
    dp, tp = results.deployments
    assert dp.kv_capacity_tokens_total > 4 * tp.kv_capacity_tokens_total  # TP8 stores 8 copies


def test_ttft_card_shows_a_bound_when_the_percentile_lies_beyond_the_samples(
    results: Results,
) -> None:
    card = next(c for c in results_view.CARDS if c.label == "TTFT p90 ms")
    d = results.deployments[0]
    assert results_view.card_text(card, d) == f"{ms(d.ttft_s.p90):,.0f}"
    backlog = d.ttft_s.model_copy(update={"p90": None, "p99": None, "exceeds_s": 4.2})
    assert results_view.card_text(card, d.model_copy(update={"ttft_s": backlog})) == ">4,200"
    none = d.ttft_s.model_copy(update={"p90": None, "exceeds_s": None})
    assert results_view.card_text(card, d.model_copy(update={"ttft_s": none})) == "-"
    # throughput carries its batch-means interval
    tput = next(c for c in results_view.CARDS if c.label == "out tok/s/GPU")
    shown = d.model_copy(update={"output_tok_s_per_gpu": 464.0, "output_tok_s_per_gpu_ci95": 12.0})
    assert results_view.card_text(tput, shown) == "464 ±2.6%"
    bare = d.model_copy(update={"output_tok_s_per_gpu": 464.0, "output_tok_s_per_gpu_ci95": None})
    assert results_view.card_text(tput, bare) == "464"
    # against the baseline, throughput's change carries the paired interval
    parts = [100.0, 110.0, 90.0, 100.0, 105.0, 95.0, 100.0, 100.0, 110.0, 90.0]
    base = d.model_copy(update={"output_tok_s_per_gpu_batches": parts})
    faster = d.model_copy(update={"output_tok_s_per_gpu_batches": [1.2 * x for x in parts]})
    assert results_view.card_delta(tput, faster, base) == "+20% ±0% vs baseline"
    ttft_card = next(c for c in results_view.CARDS if c.label == "TTFT p90 ms")
    assert results_view.card_delta(ttft_card, faster, base) == "+0% vs baseline"
    # the waiting requests the TTFT curves leave out are named under them
    assert results_view.waiting_note({"a": [], "b": []}) is None
    note = results_view.waiting_note({"a": [], "b": [3.0, 12.5]})
    assert note is not None and "b: 2 (longest 12.5 s so far)" in note


def test_memory_fit_is_plan_memorys_own_check() -> None:
    model, h200 = load_model("deepseek-v3"), load_gpu("h200")
    small = Deployment(name="ep2", gpus_per_node=2, moe_ep=2)
    big = Deployment(name="ep8", gpus_per_node=8, moe_ep=8)
    with pytest.raises(ValueError, match="does not fit") as caught:
        plan_memory(model, h200, small)
    plan_memory(model, h200, big)
    rows = memory_view.memory_rows(model, h200, [small, big])
    assert [r["fits"] for r in rows] == [False, True]
    assert rows[0]["problem"] == str(caught.value) and rows[1]["problem"] is None


def test_ms() -> None:
    assert ms(0.25) == 250.0 and ms(None) is None
