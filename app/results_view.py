"""Showing a run: metric cards with deltas, latency CDFs, step-time breakdown, rank imbalance.

Shared by the What-if and Scenarios pages. The first deployment is the baseline of every delta.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import streamlit as st

from app import charts
from app.units import ms
from app.workers import WAITING
from sim.api import DeploymentResults, Results, throughput_vs


@dataclass(frozen=True)
class Card:
    label: str
    value: Callable[[DeploymentResults], float | None]
    fmt: str
    higher_is_better: bool
    help: str
    # where the value is None but known to exceed something (a TTFT percentile beyond every
    # first token seen, requests still waiting): that bound, shown as '>bound'
    bound: Callable[[DeploymentResults], float | None] = lambda d: None
    # half-width of the value's 95% interval, shown as '±N%' after it
    spread: Callable[[DeploymentResults], float | None] = lambda d: None
    # compared with the baseline part by part of the window (throughput: the same requests)
    paired: bool = False


CARDS = (
    Card("out tok/s/GPU", lambda d: d.output_tok_s_per_gpu, "{:,.0f}", True,
         "Generated tokens per second per GPU over the measurement window; ± the half-width "
         "of its 95% interval from ten batch means (wide: the figure depends on the window).",
         spread=lambda d: d.output_tok_s_per_gpu_ci95, paired=True),
    Card("TTFT p90 ms", lambda d: ms(d.ttft_s.p90), "{:,.0f}", False,
         "Time to first token; requests still waiting at the end count as at least their wait "
         "(Kaplan-Meier). '>' marks a p90 beyond every first token seen.",
         bound=lambda d: ms(d.ttft_s.exceeds_s)),
    Card("TPOT p90 ms", lambda d: ms(d.tpot_s.p90), "{:,.1f}", False,
         "Time per output token after the first."),
    Card("goodput req/s", lambda d: d.goodput_req_s, "{:,.2f}", True,
         "Completed requests per second that met both SLO targets."),
    Card("KV tokens (distinct)", lambda d: d.kv_capacity_tokens_total, "{:,.0f}", True,
         "Distinct tokens the deployment can cache: per attention rank x ranks x replicas."),
    Card("KV dup factor", lambda d: d.kv_dup_factor, "{:,.0f}", False,
         "Copies of each cached token inside one attention rank (= attention TP for MLA)."),
)  # fmt: skip


def card_values(results: Results) -> list[dict[str, float | None]]:
    """Per deployment, every card's value (the numbers the cards print)."""
    return [{c.label: c.value(d) for c in CARDS} for d in results.deployments]


def card_text(c: Card, d: DeploymentResults) -> str:
    """A card's figure: its value (with its interval as ±%, where known), '>' its bound where
    only that is known, else '-'."""
    v, bound, spread = c.value(d), c.bound(d), c.spread(d)
    if v is not None and spread is not None and v > 0:
        return f"{c.fmt.format(v)} ±{100 * spread / v:.2g}%"
    if v is not None:
        return c.fmt.format(v)
    return "-" if bound is None else ">" + c.fmt.format(bound)


def _delta(value: float | None, base: float | None) -> str | None:
    if value is None or base is None or base == 0:
        return None
    return f"{(value - base) / abs(base):+.0%} vs baseline"


def card_delta(c: Card, d: DeploymentResults, base: DeploymentResults) -> str | None:
    """A card's change against the baseline; for throughput, with the 95% interval of the
    paired comparison (both ran on the same requests, part by part of the window)."""
    paired = throughput_vs(d, base) if c.paired else None
    if paired is not None:
        return f"{paired[0] - 1:+.0%} ±{paired[1]:.0%} vs baseline"
    return _delta(c.value(d), c.value(base))


def metric_cards(results: Results) -> None:
    """One row per deployment, one card per metric; deltas against the first deployment."""
    deps = results.deployments
    base = deps[0]
    for d in deps:
        st.markdown(f"**{d.name}** · {d.gpus} GPUs" + (" · baseline" if d is base else ""))
        for col, c in zip(st.columns(len(CARDS)), CARDS, strict=True):
            col.metric(
                c.label, card_text(c, d),
                delta=None if d is base else card_delta(c, d, base), help=c.help,
                delta_color="normal" if c.higher_is_better else "inverse", border=True,
            )  # fmt: skip


def latency_cdfs(samples: Mapping[str, Mapping[str, Sequence[float]]], key: str) -> None:
    """One CDF at a time (a chart per metric would triple the browser's drawing work)."""
    metric = (
        st.segmented_control(
            "latency", ["TTFT", "TPOT", "E2E"], default="TTFT", key=f"{key}_cdf_metric"
        )
        or "TTFT"
    )
    per_dep = {name: s.get(metric, []) for name, s in samples.items()}
    st.plotly_chart(charts.latency_cdf(per_dep, metric=metric), key=f"{key}_cdf")
    if metric == "TTFT":
        waiting = {name: s.get(WAITING, []) for name, s in samples.items()}
        if note := waiting_note(waiting):
            st.caption(note)


def waiting_note(waiting: Mapping[str, Sequence[float]]) -> str | None:
    """What the TTFT curves leave out: requests still waiting for a first token at the end."""
    parts = [
        f"{name}: {len(w):,} (longest {max(w):.3g} s so far)" for name, w in waiting.items() if w
    ]
    if not parts:
        return None
    return (
        "Still waiting for a first token at the end, not drawn: " + "; ".join(parts) + ". The "
        "table's TTFT percentiles count them as at least their wait."
    )


def op_sources(results: Results) -> dict[str, str]:
    """Each op's legend label: where its time came from ("mixed" when deployments differ), and
    ", extrapolated" when it was estimated outside a measured grid or from another GPU's table
    (naming the deployments when only some were)."""
    sources: dict[str, str] = {}
    for d in results.deployments:
        for op, src in d.step_sources.items():
            sources[op] = src if sources.get(op, src) == src else "mixed"
    for op in sources:
        having = [d for d in results.deployments if op in d.step_sources]
        extra = [d.name for d in having if op in d.extrapolated_ops]
        if extra:
            where = "" if len(extra) == len(having) else f" in {', '.join(extra)}"
            sources[op] += f", extrapolated{where}"
    return sources


def breakdown(results: Results, key: str) -> None:
    """Mean step time by op; each op's legend names where its time came from."""
    per_dep = {d.name: d.step_breakdown_s for d in results.deployments}
    st.plotly_chart(charts.step_breakdown(per_dep, op_sources(results)), key=f"{key}_breakdown")


def imbalance(results: Results, key: str) -> None:
    values = {d.name: d.dp_imbalance or 1.0 for d in results.deployments}
    st.plotly_chart(
        charts.bar(
            values,
            title="DP-rank imbalance (max/mean of each rank's own time)",
            y_label="ratio",
            ref=1.0,
        ),
        key=f"{key}_imbalance",
    )


def details_table(results: Results) -> None:
    rows = []
    for d in results.deployments:
        r = d.requests
        rows.append(
            {
                "deployment": d.name,
                "GPUs": d.gpus,
                "step ms": ms(d.step_time_s),
                "decode batch/rank": d.decode_batch_per_rank,
                "KV util": d.kv_utilisation,
                "MTP accept len": d.mtp_accept_len,
                "done/arrived": f"{r.completed}/{r.arrived}",
                "queued": r.queued,
                "rejected": r.rejected,
                "SLO met": d.slo_met,
                "profile": d.profile,
            }
        )
    st.dataframe(rows, hide_index=True, key="results_details")


def show(results: Results, samples: Mapping[str, Mapping[str, Sequence[float]]], key: str) -> None:
    """Everything a run shows, in reading order."""
    metric_cards(results)
    st.subheader("Latency distributions")
    latency_cdfs(samples, key)
    c1, c2 = st.columns([3, 2])
    with c1:
        breakdown(results, key)
    with c2:
        imbalance(results, key)
    details_table(results)
