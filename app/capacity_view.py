"""GPUs for a target rate: `sim.search.capacity` on the What-if page, in the app's worker pool.

The search varies an open-loop arrival rate. A closed-loop page workload is searched as Poisson
arrivals with the same request lengths and prefix-cache hits, from a start rate the user sets;
a trace cannot be searched. Reports are kept for the session by the searched scenario's content
hash and the search options, so re-renders (or going back to earlier inputs) do not re-run.
A PD pair is also sized pool by pool (`app.pd_capacity_view`).
"""

from __future__ import annotations

import time
from concurrent.futures import Executor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from app import charts, components, export, pd_capacity_view, runner
from app.units import ms
from sim.api import (
    OPEN_LOOP,
    CapacityError,
    CapacityReport,
    ProbeFn,
    ProcessBackend,
    capacity_search,
    load_of,
    search_count,
)
from sim.specs.scenario import Scenario
from sim.specs.workload import PoissonWorkload

DEFAULT_TARGET_REQ_S = 100.0
DEFAULT_TOLERANCE_PCT = 5.0
DEFAULT_MAX_RUNS = 12
DEFAULT_START_REQ_S = 4.0  # the traffic form's own default Poisson rate
KEPT_REPORTS = 16  # per session; the oldest goes first


@dataclass(frozen=True)
class Options:
    """What the user asks of one search (besides the scenario)."""

    target_rate_req_s: float
    tolerance: float
    max_runs: int

    def key(self, scenario: Scenario) -> str:
        """Cache key: the searched scenario's content and these options."""
        return (
            f"{runner.content_hash(scenario)}|{self.target_rate_req_s!r}|"
            f"{self.tolerance!r}|{self.max_runs}"
        )


def searchable(scenario: Scenario, start_rate_req_s: float) -> Scenario:
    """The scenario the search varies: an open-loop one as is; a closed loop as Poisson arrivals
    at `start_rate_req_s` with the same lengths and prefix-cache hits. CapacityError for a trace.
    """
    w = scenario.workload
    if w.kind in OPEN_LOOP:
        return scenario
    if w.kind != "closed":
        raise CapacityError(
            f"a {w.kind} workload has no arrival rate to vary: the capacity search needs Poisson "
            "or Gamma arrivals (choose an open-loop traffic above)"
        )
    kept = {k: v for k, v in w.model_dump(mode="json").items() if k in PoissonWorkload.model_fields}
    workload = kept | {"kind": "poisson", "rate_req_s": start_rate_req_s}
    return Scenario.model_validate(scenario.model_dump(mode="json") | {"workload": workload})


def search(
    pool: Executor, scenario: Scenario, options: Options, on_probe: ProbeFn | None = None
) -> CapacityReport:
    """The capacity report, probes run in `pool` (left open). Raises CapacityError for an
    option the search refuses, ValueError for a deployment that does not fit."""
    with ProcessBackend(executor=pool) as backend:
        return capacity_search(
            scenario, options.target_rate_req_s, backend, tolerance=options.tolerance,
            max_runs=options.max_runs, on_probe=on_probe,
        )  # fmt: skip


def report_table(report: CapacityReport) -> pd.DataFrame:
    """One row per deployment, the columns of `mlasim capacity` plus the note."""
    ttft, tpot = _latency_columns(report)
    gpus = f"GPUs for {report.target_rate_req_s:g} req/s"
    table = pd.DataFrame(
        [
            {
                "deployment": d.deployment,
                "max req/s": d.max_rate_req_s,
                "tok/s/GPU": d.output_tok_s_per_gpu,
                ttft: ms(d.ttft_s),
                tpot: ms(d.tpot_s),
                "GPUs each": d.gpus_per_deployment,
                "replicas": d.replicas,
                gpus: d.gpus,
                "runs": d.runs,
                "status": d.status,
                "note": d.note,
            }
            for d in report.deployments
        ]
    )
    return table.astype({"replicas": "Int64", gpus: "Int64"})  # a missing count stays empty


def _latency_columns(report: CapacityReport) -> list[str]:
    pct = f"p{report.slo.percentile:g}"
    return [f"TTFT {pct} ms", f"TPOT {pct} ms"]


def _figures(report: CapacityReport) -> None:
    pct, slo = f"p{report.slo.percentile:g}", report.slo
    cols = st.columns(2)
    for col, metric, attr, target_s in (
        (cols[0], "TPOT", "tpot_s", slo.tpot_s),
        (cols[1], "TTFT", "ttft_s", slo.ttft_s),
    ):
        probes = {
            d.deployment: [(p.rate_req_s, ms(getattr(p, attr)), p.meets_slo) for p in d.probes]
            for d in report.deployments
        }
        fig = charts.capacity_probes(probes, metric=f"{metric} {pct}", slo_ms=target_s * 1e3)
        col.plotly_chart(fig, key=f"wi_cap_fig_{attr}")
    if pct not in ("p50", "p90", "p99"):
        st.caption(f"Results carry p50, p90 and p99 only: no {pct} latencies to draw.")


def show(report: CapacityReport, searched: Scenario) -> None:
    """The report: table, PD pools sized apart (if any), probe charts, downloads."""
    st.dataframe(
        report_table(report),
        hide_index=True,
        key="wi_cap_table",
        column_config={
            "max req/s": st.column_config.NumberColumn(format="%.4g"),
            "tok/s/GPU": st.column_config.NumberColumn(format="%.0f"),
            **{c: st.column_config.NumberColumn(format="%.1f") for c in _latency_columns(report)},
            "note": st.column_config.TextColumn(width="large"),
        },
    )
    pd_capacity_view.show(report)
    _figures(report)
    c1, c2 = st.columns(2)
    c1.download_button(
        "capacity report JSON",
        report.model_dump_json(indent=2),
        file_name=f"{searched.name}-capacity.json",
        mime="application/json",
        key="wi_cap_dl_json",
    )
    c2.download_button(
        "searched scenario YAML (for `mlasim capacity`)",
        export.scenario_yaml(searched),
        file_name=f"{searched.name}-capacity.yaml",
        mime="text/yaml",
        key="wi_cap_dl_yaml",
    )


def _inputs(closed: bool) -> tuple[Options, float]:
    cols = st.columns(4)
    target = cols[0].number_input(
        "target rate (req/s)", 0.001, 1e7, DEFAULT_TARGET_REQ_S, key="wi_cap_target",
        help="Arrival rate to provision for: replicas = ceil(target / highest rate meeting the "
        "SLO).",
    )  # fmt: skip
    tol = cols[1].number_input(
        "tolerance (%)", 0.1, 50.0, DEFAULT_TOLERANCE_PCT, step=1.0, key="wi_cap_tol",
        help="Stop when the lowest failing rate is within this of the highest meeting one.",
    )  # fmt: skip
    runs = cols[2].number_input(
        "max runs per deployment", 2, 60, DEFAULT_MAX_RUNS, key="wi_cap_runs",
        help="Most simulations each deployment's search may use.",
    )  # fmt: skip
    start = DEFAULT_START_REQ_S
    if closed:
        start = cols[3].number_input(
            "start rate (req/s)", 0.001, 1e7, DEFAULT_START_REQ_S, key="wi_cap_start",
            help="First Poisson rate probed; the search doubles or halves it from there.",
        )  # fmt: skip
    return Options(float(target), float(tol) / 100, int(runs)), float(start)


def _run(searched: Scenario, options: Options) -> tuple[CapacityReport, float] | None:
    bound = options.max_runs * search_count(searched)
    bar = st.progress(0.0, text="waiting for worker processes")
    done = [0]

    def on_probe(name: str, rate: float, ok: bool) -> None:
        done[0] += 1
        verdict = "meets" if ok else "misses"
        bar.progress(
            min(done[0] / bound, 1.0),
            text=f"{done[0]} of at most {bound} probes · {name} {verdict} at {rate:.4g} req/s",
        )

    t0 = time.perf_counter()
    try:
        report = search(runner.pool().pool, searched, options, on_probe)
    except BrokenProcessPool:
        runner.pool.clear()  # the next search starts fresh workers
        st.error("A worker process stopped (out of memory?); press the button again.")
        return None
    except Exception as exc:  # shown in the page, never a traceback
        components.show_error(exc, "The capacity search could not run:")
        return None
    finally:
        bar.empty()
    return report, time.perf_counter() - t0


def render(scenario: Scenario) -> None:
    """The section: inputs, the search button, and the report of these inputs once searched."""
    st.subheader("GPUs for a target rate")
    kind = scenario.workload.kind
    if kind not in (*OPEN_LOOP, "closed"):
        st.info(f"The capacity search needs Poisson or Gamma arrivals, not a {kind} workload.")
        return
    options, start = _inputs(closed=kind == "closed")
    searched = searchable(scenario, start)
    if kind == "closed":
        st.caption(
            "The page's traffic is closed-loop, which has no arrival rate: the search uses "
            f"Poisson arrivals (from {start:g} req/s) with the same request lengths and "
            "prefix-cache hits."
        )
    else:
        _, rate = load_of(scenario)
        st.caption(
            f"The search starts from the page's rate, {rate:g} req/s, doubling or halving it "
            "until the SLO is bracketed, then narrowing the bracket."
        )
    reports: dict[str, tuple[str, float]] = st.session_state.setdefault("wi_cap_reports", {})
    key = options.key(searched)
    label = f"Find GPUs for {options.target_rate_req_s:g} req/s"
    if st.button(label, key="wi_cap_run") and key not in reports:
        outcome = _run(searched, options)
        if outcome is None:
            return
        reports[key] = (outcome[0].model_dump_json(), outcome[1])
        while len(reports) > KEPT_REPORTS:
            reports.pop(next(iter(reports)))
    if key not in reports:
        st.info("Press the button to search (each deployment's probes run in parallel).")
        return
    data, wall_s = reports[key]
    report = CapacityReport.model_validate_json(data)
    pools = [r for p in report.pd_pools for r in (p.prefill, p.decode)]
    runs = sum(d.runs for d in (*report.deployments, *pools))
    each = "" if report.duration_s is None else f" of {report.duration_s:g} simulated s each"
    st.caption(f"{runs} simulations{each} took {wall_s:.1f} s.")
    show(report, searched)
