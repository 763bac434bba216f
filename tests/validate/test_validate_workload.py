"""A row's benchmark: the client's counts, warm-up left out, and a scenario that survives the
trip to a worker process."""

from __future__ import annotations

import pytest

from sim.search.backends import SerialBackend
from sim.specs.scenario import Scenario
from sim.validate.mapping import Mapped, map_row
from sim.validate.rows import read_rows
from sim.validate.runner import record_of
from sim.validate.workload import TOOL_WARMUP_PER_USER, BenchCounts


def _mapped(row_csv, counts: BenchCounts, **over) -> Mapped:
    [r], _ = read_rows(row_csv({"osl": 8, "isl": 512, **over}))
    m = map_row(r, counts=counts)
    assert isinstance(m, Mapped), m
    return m


def test_counts_scale_with_the_rows_concurrency(row_csv) -> None:
    w = _mapped(row_csv, BenchCounts(3, 7)).scenario.workload
    assert (w.warmup_requests, w.num_prompts, w.max_concurrency) == (24, 56, 8)


def test_long_answers_run_as_measured_unless_capped(row_csv) -> None:
    for counts, want in ((BenchCounts(), (80, 80)), (BenchCounts(long_per_user=3), (80, 24))):
        short = _mapped(row_csv, counts, osl=2048).scenario.workload
        long = _mapped(row_csv, counts, osl=2049).scenario.workload
        assert (short.num_prompts, long.num_prompts) == want
    assert BenchCounts(0, 2, 3).measured_for(8192) == 2  # never more than asked for


def test_counts_must_be_meaningful() -> None:
    with pytest.raises(ValueError, match="measured 0 and"):
        BenchCounts(2, 0)
    with pytest.raises(ValueError, match="warm-up -1"):
        BenchCounts(-1, 10)
    with pytest.raises(ValueError, match="request path 'client': use none or engine"):
        BenchCounts(request_path="client")


def test_the_request_path_reaches_the_rows_benchmark(row_csv) -> None:
    assert _mapped(row_csv, BenchCounts()).scenario.workload.request_path == "none"
    w = _mapped(row_csv, BenchCounts(request_path="engine")).scenario.workload
    assert w.request_path == "engine"


def test_the_scenario_reads_back_from_its_json(row_csv) -> None:
    """The backends hand a worker the scenario as JSON; the benchmark's infinite request rate
    must come back as inf (pydantic's default writes it as null, which the field refuses)."""
    sc = _mapped(row_csv, BenchCounts()).scenario
    assert Scenario.model_validate_json(sc.model_dump_json()) == sc


def _figures(m: Mapped) -> dict:
    with SerialBackend() as be:
        [(_, res)] = list(be.run([m.scenario]))
    rec = record_of(m, res, 0.0)
    assert rec["status"] == "ok", rec
    return {k: rec[k] for k in ("pred_ttft_ms", "pred_tpot_ms", "sim_output_tok_s_per_gpu")}


def test_warm_up_is_left_out_and_leaves_nothing_behind(row_csv) -> None:
    """aiperf starts profiling once every warm-up response is back, so the measured requests
    meet an idle server; the simulator keeps nothing from the warm-up either (fixed, distinct
    prompts: no cache to warm). The measured figures are the same with and without it, which
    is why no row simulates it by default (sim.validate.workload.BenchCounts)."""
    warm = _figures(_mapped(row_csv, BenchCounts(TOOL_WARMUP_PER_USER, 3)))
    cold = _figures(_mapped(row_csv, BenchCounts(0, 3)))
    assert warm == pytest.approx(cold, rel=1e-9)  # the same steps, later on the clock
    assert all(v > 0 for v in warm.values())
