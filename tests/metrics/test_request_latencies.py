"""`sim.metrics.request_latencies`: the one per-request TTFT/TPOT/E2E computation behind the
summary's percentiles and goodput, the per-request export and the app's latency CDFs."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from sim.engine import Phase, RequestRecord, RequestTable
from sim.io.requests_io import request_columns
from sim.io.scenario_io import parse_scenario
from sim.metrics import request_latencies
from sim.metrics.stats import batch_means_ci95, censored_percentiles, percentiles
from sim.run import simulate_scenario, summarize_scenario
from tests.builders import SMALL_TEXT
from tests.engine.fixed_cost import small_factory


def _table() -> RequestTable:
    """Four requests: done (5 tokens), done (1 token), decoding, and done before the warm-up."""
    t = RequestTable()
    t.add(
        np.array([1.0, 2.0, 3.0, 0.5]),
        np.array([100, 100, 100, 100]),
        np.array([5, 1, 10, 3]),
        np.zeros(4, dtype=np.int64),
    )
    t.first_token_s[:4] = [1.5, 2.25, 3.5, 0.75]
    t.finish_s[:4] = [2.5, 2.25, np.nan, 1.75]
    t.phase[:4] = [Phase.DONE, Phase.DONE, Phase.DECODE, Phase.DONE]
    return t


def test_hand_checked_latencies() -> None:
    out = SimpleNamespace(requests=RequestRecord.of(_table()), warmup_s=0.9, end_s=4.0)
    lat = request_latencies(out)  # type: ignore[arg-type]
    assert lat.ttft_s.tolist() == [0.5, 0.25, 0.5, 0.25]
    assert lat.tpot_s[0] == 0.25 and lat.tpot_s[3] == 0.5  # (finish - first) / (out - 1)
    assert np.isnan(lat.tpot_s[1]) and np.isnan(lat.tpot_s[2])  # one token; not finished
    assert lat.e2e_s[[0, 1, 3]].tolist() == [1.5, 0.25, 1.25] and np.isnan(lat.e2e_s[2])
    assert lat.measured.tolist() == [True, True, False, False]  # done and after the warm-up
    s = lat.samples()
    assert s["TTFT"].tolist() == [0.5, 0.25, 0.5]  # the decoding request has its first token
    assert lat.ttft_censored().size == 0  # nobody is still waiting for one
    assert s["TPOT"].tolist() == [0.25]  # the one-token request has no TPOT
    assert s["E2E"].tolist() == [1.5, 0.25]


def test_slo_outcomes_count_known_failures() -> None:
    """Six requests under a 1 s TTFT / 0.3 s TPOT SLO, the run ending at 10 s."""
    from sim.metrics.summary import _attainment, _slo_outcomes
    from sim.specs.scenario import Slo

    t = RequestTable()
    t.add(
        np.array([1.0, 2.0, 3.0, 4.0, 9.5, 5.0]),
        np.full(6, 100),
        np.array([5, 5, 10, 10, 10, 10]),
        np.zeros(6, dtype=np.int64),
    )
    t.first_token_s[:6] = [1.5, 2.25, 4.5, np.nan, np.nan, np.nan]
    t.finish_s[:6] = [2.5, 4.25, np.nan, np.nan, np.nan, np.nan]
    done, decode, queued = Phase.DONE, Phase.DECODE, Phase.QUEUED
    t.phase[:6] = [done, done, decode, queued, queued, Phase.REJECTED]
    out = SimpleNamespace(requests=RequestRecord.of(t), warmup_s=0.0, end_s=10.0)
    lat = request_latencies(out)  # type: ignore[arg-type]
    met, failed = _slo_outcomes(out, lat, Slo(ttft_s=1.0, tpot_s=0.3))  # type: ignore[arg-type]
    # met; TPOT 0.5 s too slow; first token 1.5 s late; waiting 6 s; waiting 0.5 s (undecided);
    # rejected
    assert met.tolist() == [True, False, False, False, False, False]
    assert failed.tolist() == [False, True, True, True, False, True]
    assert _attainment(met, failed, lat.after_warmup) == pytest.approx(1 / 5)
    # TTFT: three first tokens; two requests still waiting (6 s and 0.5 s so far) are lower
    # bounds; the rejected one is neither
    assert lat.samples()["TTFT"].tolist() == [0.5, 0.25, 1.5]
    assert sorted(lat.ttft_censored().tolist()) == [0.5, 6.0]
    # E2E: two finished; the decoding request (7 s so far) and the two waiting are lower bounds
    assert sorted(lat.e2e_censored().tolist()) == [0.5, 6.0, 7.0]


@pytest.fixture(scope="module")
def run() -> Any:
    sc = parse_scenario(SMALL_TEXT)
    outputs = simulate_scenario(sc, cost_factory=small_factory)
    return sc, outputs, summarize_scenario(sc, outputs)


def test_summary_reports_exactly_these_latencies(run: Any) -> None:
    sc, outputs, results = run
    for out, d in zip(outputs, results.deployments, strict=True):
        lat = request_latencies(out.record)
        s = lat.samples()
        assert s["TTFT"].size > 0 and s["TPOT"].size > 0
        assert censored_percentiles(s["TTFT"], lat.ttft_censored()) == d.ttft_s
        assert percentiles(s["TPOT"]) == d.tpot_s
        assert censored_percentiles(s["E2E"], lat.e2e_censored()) == d.e2e_s
        assert int(lat.measured.sum()) == d.requests.completed
        # throughput's interval: batch means of the steps' output tokens over the window
        logs = [pool.log for pool in out.record.pools]
        ends = np.concatenate([g.column("start_s") + g.column("duration_s") for g in logs])
        tokens = np.concatenate([g.column("output_tokens") for g in logs]).astype(float)
        ci = batch_means_ci95(ends, tokens, out.warmup_s, out.end_s)
        assert ci is not None and d.output_tok_s_per_gpu_ci95 == pytest.approx(ci / d.gpus)
        # the ten parts' rates average to the window's throughput
        parts = d.output_tok_s_per_gpu_batches
        assert parts is not None and len(parts) == 10
        assert np.mean(parts) == pytest.approx(d.output_tok_s_per_gpu)
        # goodput: requests finished in the window within both targets (the population of the
        # request throughput, so the two agree when every request meets the SLO)
        t, n = out.table, out.table.size
        finish, arrival = t.finish_s[:n], t.arrival_s[:n]
        tpot = np.nan_to_num(lat.tpot_s, nan=0.0)
        met = lat.done & (lat.ttft_s <= sc.slo.ttft_s) & (tpot <= sc.slo.tpot_s)
        in_window = lat.done & (finish >= out.warmup_s)
        assert int((met & in_window).sum()) / d.window_s == pytest.approx(d.goodput_req_s)
        assert int(in_window.sum()) / d.window_s == pytest.approx(d.request_throughput_req_s)
        # attainment counts known failures: still waiting past the TTFT target, or a late first
        # token, fail even unfinished; requests in flight within both targets are left out
        no_token = np.isnan(lat.ttft_s)
        failed = (lat.done & ~met) | (no_token & (out.end_s - arrival > sc.slo.ttft_s))
        failed |= ~no_token & (lat.ttft_s > sc.slo.ttft_s)
        decided = (met | failed) & lat.after_warmup
        assert d.slo_attainment == pytest.approx(met[decided].mean())


def test_export_columns_are_the_same_arrays(run: Any) -> None:
    _, outputs, _ = run
    for out in outputs:
        lat, cols = request_latencies(out.record), request_columns(out)
        for name in ("ttft_s", "tpot_s", "e2e_s"):
            assert np.array_equal(cols[name], getattr(lat, name), equal_nan=True)
        assert np.array_equal(cols["after_warmup"], lat.after_warmup)
        assert np.array_equal(cols["status"] == "done", lat.done)
