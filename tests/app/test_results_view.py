"""What the results view and the memory view show, from the simulator's own figures: the step
breakdown's source labels (extrapolation included), the distinct-KV card, the memory fit."""

from __future__ import annotations

import pytest

from app import charts, memory_view, results_view
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
    assert results_view.card_text(tput, shown) == "464 :small[±2.6%]"
    bare = d.model_copy(update={"output_tok_s_per_gpu": 464.0, "output_tok_s_per_gpu_ci95": None})
    assert results_view.card_text(tput, bare) == "464"
    # against the baseline, throughput's change carries the paired interval
    parts = [100.0, 110.0, 90.0, 100.0, 105.0, 95.0, 100.0, 100.0, 110.0, 90.0]
    base = d.model_copy(update={"output_tok_s_per_gpu_batches": parts})
    faster = d.model_copy(update={"output_tok_s_per_gpu_batches": [1.2 * x for x in parts]})
    assert results_view.card_delta(tput, faster, base) == "+20% ±0%"
    ttft_card = next(c for c in results_view.CARDS if c.label == "TTFT p90 ms")
    assert results_view.card_delta(ttft_card, faster, base) == "+0%"
    dup = next(c for c in results_view.CARDS if c.label == "KV dup factor")
    assert results_view.card_delta(dup, faster, base) is None  # a layout fact, not a gain
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


TBO = """\
name: tbo
model: deepseek-v3
gpu: h200
deployments:
  - {name: tp8, attn_tp: 8, moe_tp: 8}
  - {name: dp8_tbo, attn_tp: 1, moe_ep: 8, two_batch_overlap: true}
  - {name: tp8_sglang, attn_tp: 8, moe_tp: 8, engine: sglang}
workload:
  kind: closed
  concurrency: 128
  input: {kind: fixed, tokens: 1000}
  output: {kind: fixed, tokens: 50}
slo: {ttft_s: 3.0, tpot_s: 0.1, percentile: 90}
run: {duration_s: 6, warmup_s: 1, seed: 1}
"""


def test_breakdown_shows_what_overlap_hid_by_how_so_parts_add_up_to_the_step() -> None:
    results = run_scenario(parse_scenario(TBO))
    parts = results_view.step_parts(results)
    tp8, tbo, sglang = results.deployments
    assert not set(charts.OVERLAP_ROWS) & set(parts["tp8"])  # no overlap, no segment
    assert tp8.overlap_row is None and tbo.overlap_row == charts.OVERLAP
    saved = results_view.overlap_saved(tbo)
    assert saved is not None and saved < 0  # 16 decode requests per rank: splitting costs time
    assert parts["dp8_tbo"][charts.OVERLAP] == pytest.approx(-saved)
    # SGLang's graph-replayed decode hides its shared experts on a second stream: its own row
    stream = results_view.overlap_saved(sglang)
    assert sglang.overlap_row == "shared_experts_stream" and stream is not None and stream > 0
    assert "forward_normal_dual_stream" in (sglang.overlap_source or "")
    assert parts["tp8_sglang"]["shared_experts_stream"] == pytest.approx(-stream)
    assert charts.OVERLAP not in parts["tp8_sglang"]
    for d in results.deployments:
        assert sum(parts[d.name].values()) == pytest.approx(d.step_time_s, rel=1e-9)
    steps = {d.name: d.step_time_s for d in results.deployments}
    fig = charts.step_breakdown(parts, results_view.op_sources(results), step_s=steps)
    seg = next(t for t in fig.data if t.name == charts.OVERLAP_LABEL)
    assert list(seg.y) == pytest.approx([0.0, -saved * 1e3, 0.0])  # a cost is a positive segment
    seg = next(t for t in fig.data if t.name == charts.overlap_label("shared_experts_stream"))
    assert list(seg.y) == pytest.approx([0.0, 0.0, -stream * 1e3])
    assert fig.data[-1].name == "step time"
    assert list(fig.data[-1].y) == pytest.approx([d.step_time_s * 1e3 for d in results.deployments])


def test_an_empty_latency_cdf_says_so_instead_of_drawing_empty_axes() -> None:
    empty = charts.latency_cdf({"tp8": [], "dp8": []}, metric="TTFT")
    (note,) = empty.layout.annotations
    assert "No request in the window got a first token" in note.text
    assert empty.layout.xaxis.visible is False
    drawn = charts.latency_cdf({"tp8": [], "dp8": [0.5, 0.7]}, metric="TTFT")
    assert not drawn.layout.annotations and drawn.layout.xaxis.visible is not False
    assert "completed" in charts.latency_cdf({"a": []}, metric="TPOT").layout.annotations[0].text


def test_deltas_compare_per_gpu_when_gpu_counts_differ(results: Results) -> None:
    goodput = next(c for c in results_view.CARDS if c.label == "goodput req/s")
    kv = next(c for c in results_view.CARDS if c.label == "KV tokens (distinct)")
    base = results.deployments[0].model_copy(update={"gpus": 8, "goodput_req_s": 8.0})
    same = base.model_copy(update={"goodput_req_s": 12.0})
    assert results_view.card_delta(goodput, same, base) == "+50%"
    double = base.model_copy(update={"gpus": 16, "goodput_req_s": 12.0})  # +50% on 2x the GPUs
    assert results_view.card_delta(goodput, double, base) == "-25% per GPU"
    # a PD pair's KV is its decode pool's: per GPU of that pool
    prefill, decode = (
        base.pools[0].model_copy(update={"role": r, "gpus": g})
        for r, g in (("prefill", 8), ("decode", 16))
    )
    pd = base.model_copy(
        update={"kind": "pd", "gpus": 24, "pools": [prefill, decode],
                "kv_capacity_tokens_total": 4 * base.kv_capacity_tokens_total}
    )  # fmt: skip
    assert results_view.kv_gpus(pd) == 16
    assert results_view.card_delta(kv, pd, base) == "+100% per GPU"
    head = results_view.row_head(pd, "P: x | D: y", baseline=False)
    want = "**dp8_ep8** · P: x | D: y · 24 GPUs (prefill 8 + decode 16) · KV cards: decode pool"
    assert head == want


def test_memory_table_counts_kv_in_whole_pages_as_the_cards(results: Results) -> None:
    model, h200 = load_model("deepseek-v3"), load_gpu("h200")
    layouts = parse_scenario(SCENARIO).deployments
    rows = memory_view.memory_rows(model, h200, layouts)
    for row, d in zip(rows, results.deployments, strict=True):
        assert row["kv_capacity_tokens_total"] == d.kv_capacity_tokens_total


def test_roofline_caption_only_when_no_op_was_measured_or_published(results: Results) -> None:
    assert results_view.roofline_only_note(results) is None  # h800-published kernel tables
    roofline = [
        d.model_copy(update={"step_sources": dict.fromkeys(d.step_sources, "roofline")})
        for d in results.deployments
    ]
    note = results_view.roofline_only_note(results.model_copy(update={"deployments": roofline}))
    assert note is not None and note.startswith("Every op time here is a roofline estimate")
