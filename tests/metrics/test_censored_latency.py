"""TTFT percentiles with requests still waiting at the end of a run (right-censored samples),
and the batch-means interval of a run's throughput."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest

from sim.metrics.stats import censored_percentiles, censored_quantile, percentiles, quantile

OBSERVED = np.arange(1.0, 81.0)  # 80 first tokens at 1..80 s


def test_without_waiting_requests_it_is_the_plain_percentile() -> None:
    none = np.array([])
    for q in (50, 90, 99):
        assert censored_quantile(OBSERVED, none, q) == quantile(OBSERVED, q)
    assert censored_percentiles(OBSERVED, none) == percentiles(OBSERVED)


def test_short_waits_only_leave_the_count() -> None:
    """Requests that arrived just before the end and have waited 0.5 s tell nothing about the
    tail: the estimate is the observed samples' (inverted-CDF) quantile."""
    short = np.full(30, 0.5)
    assert censored_quantile(OBSERVED, short, 50) == 40.0
    assert censored_quantile(OBSERVED, short, 90) == 72.0


def test_a_backlog_of_long_waits_raises_the_tail() -> None:
    """20 requests still waiting after 100 s: a fifth of all requests take longer than every
    first token seen. The median is the 50th of 100 requests; p90 lies beyond every observed
    value (None), where dropping the waiting requests would have said 72 s."""
    backlog = np.full(20, 100.0)
    assert censored_quantile(OBSERVED, backlog, 50) == 50.0
    assert censored_quantile(OBSERVED, backlog, 80) == 80.0
    assert censored_quantile(OBSERVED, backlog, 90) is None
    p = censored_percentiles(OBSERVED, backlog)
    assert (p.p50, p.p90, p.p99) == (50.0, None, None)
    assert p.count == 80 and p.mean == pytest.approx(40.5)  # over the first tokens seen
    assert p.exceeds_s == 80.0  # p90 and p99 lie beyond the largest first token seen


def test_the_run_table_shows_a_percentile_beyond_the_samples_as_a_bound() -> None:
    from sim.cli.format import pct

    p = censored_percentiles(OBSERVED, np.full(20, 100.0))
    assert pct(p, 1.0) == "50 / >80 / >80"
    assert pct(percentiles(OBSERVED), 1.0) == "40.5 / 72.1 / 79.2"


def test_with_nothing_observed_every_percentile_is_at_least_the_median_wait() -> None:
    """An overloaded run where no request got its first token: each one's TTFT is at least its
    wait so far, so every percentile from p50 up is at least the waits' median."""
    from sim.cli.format import pct

    waits = np.array([5.0, 20.0, 40.0, 60.0, 89.8])
    p = censored_percentiles(np.array([]), waits)
    assert (p.count, p.mean, p.p50, p.p90, p.p99) == (0, None, None, None, None)
    assert p.exceeds_s == 40.0
    assert pct(p, 1.0) == ">40 / >40 / >40"


def test_waits_between_samples_count_for_the_later_ones() -> None:
    """Kaplan-Meier by hand: values 1, 2, 3, 4 and one request censored at 2.5. Survival after
    1: 4/5, after 2: 3/5, the censored leaves, after 3: 3/5 * 1/2 = 0.3, after 4: 0."""
    obs, cens = np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.5])
    assert censored_quantile(obs, cens, 40) == 2.0  # survival 0.6 <= 0.6
    assert censored_quantile(obs, cens, 50) == 3.0  # 0.6 > 0.5, then 0.3
    assert censored_quantile(obs, cens, 75) == 4.0  # 0.3 > 0.25, then 0


def test_batch_means_interval_of_a_steady_and_a_wavy_rate() -> None:
    from sim.metrics.stats import BATCHES, T_975_9, batch_means_ci95

    times = np.arange(0.05, 100.0, 0.1)  # a step every 0.1 s over [0, 100]
    steady = np.full(times.size, 5.0)  # 50 tokens/s throughout
    assert batch_means_ci95(times, steady, 0.0, 100.0) == pytest.approx(0.0, abs=1e-9)
    # waves: the first half of the run at 0 tokens/s, the second at 100: five parts at 0 and
    # five at 100, standard deviation 52.7, half-width 2.262 x 52.7 / sqrt(10)
    wavy = np.where(times < 50.0, 0.0, 10.0)
    want = T_975_9 * np.std([0.0] * 5 + [100.0] * 5, ddof=1) / np.sqrt(BATCHES)
    assert batch_means_ci95(times, wavy, 0.0, 100.0) == pytest.approx(want)
    # a tenth of the window without a step: no interval
    assert batch_means_ci95(times[times > 20.0], steady[times > 20.0], 0.0, 100.0) is None
    # steps before the window are not counted
    assert batch_means_ci95(times, steady, 50.0, 100.0) == pytest.approx(0.0, abs=1e-9)


def test_run_table_prints_the_interval_and_warns_when_wide() -> None:
    from sim.cli.format import with_ci
    from sim.metrics import Results
    from sim.metrics.notes import noisy_note

    assert with_ci(464.0, 12.0) == "464 ±2.6%"
    assert with_ci(464.0, None) == "464"
    d = SimpleNamespace(name="a", output_tok_s_per_gpu=400.0, output_tok_s_per_gpu_ci95=20.0)
    e = SimpleNamespace(name="b", output_tok_s_per_gpu=400.0, output_tok_s_per_gpu_ci95=80.0)
    assert noisy_note(cast(Results, SimpleNamespace(deployments=[d]))) is None
    note = noisy_note(cast(Results, SimpleNamespace(deployments=[d, e])))
    assert note is not None and "b ±20%" in note and "a ±" not in note


def test_paired_ratio_of_two_deployments() -> None:
    from sim.metrics.stats import T_975_9, paired_ratio_ci95

    base = np.array([100.0, 120.0, 80.0, 110.0, 90.0, 100.0, 130.0, 70.0, 100.0, 100.0])
    # a deployment 1.5x as fast in every part: the shared swings cancel, the ratio is exact
    ratio, half = paired_ratio_ci95(1.5 * base, base)  # type: ignore[misc]
    assert ratio == pytest.approx(1.5) and half == pytest.approx(0.0, abs=1e-12)
    # by hand: ratio of means, spread of a_i - R b_i over sqrt(n) mean(b), Student's t
    other = base + np.array([10.0, -10.0, 5.0, -5.0, 0.0, 10.0, -10.0, 5.0, -5.0, 0.0])
    ratio, half = paired_ratio_ci95(other, base)  # type: ignore[misc]
    r = other.mean() / base.mean()
    want = T_975_9 * (other - r * base).std(ddof=1) / (np.sqrt(10) * base.mean())
    assert ratio == pytest.approx(r) and half == pytest.approx(want)
    assert paired_ratio_ci95(other, np.zeros(10)) is None


def test_run_table_compares_each_deployment_with_the_first() -> None:
    from sim.cli.run import vs

    base = SimpleNamespace(output_tok_s_per_gpu=100.0, output_tok_s_per_gpu_batches=[100.0] * 10)
    rates = [150.0, 160.0, 140.0, 150.0, 150.0, 155.0, 145.0, 150.0, 150.0, 150.0]
    d = SimpleNamespace(output_tok_s_per_gpu=150.0, output_tok_s_per_gpu_batches=rates)
    assert vs(cast(Any, base), cast(Any, base)) == "1"
    assert vs(cast(Any, d), cast(Any, base)).startswith("1.5x ±0.0")
    bare = SimpleNamespace(output_tok_s_per_gpu=150.0, output_tok_s_per_gpu_batches=None)
    assert vs(cast(Any, bare), cast(Any, base)) == "1.5x"  # no parts kept: the plain ratio
