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
from sim.api import LAUNCH_ROW, DeploymentResults, PoolResults, Results, throughput_vs


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
    # compared with the baseline part by part of the window (throughput: matched parts, the
    # same requests under an open loop or trace with run.duration_s; a closed loop shares only
    # the request lengths and seed)
    paired: bool = False
    # GPUs the value is a total over: when they differ from the baseline's, the delta compares
    # per GPU (16 GPUs serving twice the goodput of 8 is no gain per GPU)
    gpus: Callable[[DeploymentResults], int] | None = None
    compare: bool = True  # False: a fact of the layout, whose change in % says nothing


def kv_pool(d: DeploymentResults) -> PoolResults | None:
    """The pool whose KV the KV cards show: a PD pair's decode pool; None for one unit."""
    return next((p for p in d.pools if p.role == "decode"), None) if d.kind == "pd" else None


def kv_gpus(d: DeploymentResults) -> int:
    pool = kv_pool(d)
    return d.gpus if pool is None else pool.gpus


CARDS = (
    Card("out tok/s/GPU", lambda d: d.output_tok_s_per_gpu, "{:,.0f}", True,
         "Generated tokens per second per GPU over the measurement window; ± the half-width "
         "of its 95% interval from ten batch means (wide: the figure depends on the window).",
         spread=lambda d: d.output_tok_s_per_gpu_ci95, paired=True),
    Card("TTFT p90 ms", lambda d: ms(d.ttft_s.p90), "{:,.0f}", False,
         "Time to first token; requests still waiting at the end count as at least their wait "
         "(Kaplan-Meier). '>' marks a p90 beyond every first token seen (with none seen, beyond "
         "the median wait).",
         bound=lambda d: ms(d.ttft_s.exceeds_s)),
    Card("TPOT p90 ms", lambda d: ms(d.tpot_s.p90), "{:,.1f}", False,
         "Time per output token after the first."),
    Card("goodput req/s", lambda d: d.goodput_req_s, "{:,.2f}", True,
         "Completed requests per second that met both SLO targets; against a baseline with "
         "another GPU count the change is per GPU.", gpus=lambda d: d.gpus),
    Card("KV tokens (distinct)", lambda d: d.kv_capacity_tokens_total, "{:,.0f}", True,
         "Distinct tokens the deployment can cache: per attention rank x ranks x replicas (a "
         "PD pair's decode pool); against a baseline with another GPU count the change is per "
         "GPU.", gpus=kv_gpus),
    Card("KV dup factor", lambda d: d.kv_dup_factor, "{:,.0f}", False,
         "Copies of each cached token inside one attention rank (= attention TP for MLA).",
         compare=False),
)  # fmt: skip


def card_values(results: Results) -> list[dict[str, float | None]]:
    """Per deployment, every card's value (the numbers the cards print)."""
    return [{c.label: c.value(d) for c in CARDS} for d in results.deployments]


def card_text(c: Card, d: DeploymentResults) -> str:
    """A card's figure: its value (with its interval as a small ±%, where known), '>' its bound
    where only that is known, else '-'."""
    v, bound, spread = c.value(d), c.bound(d), c.spread(d)
    if v is not None and spread is not None and v > 0:  # small: a full-size one is cut off
        return f"{c.fmt.format(v)} :small[±{100 * spread / v:.2g}%]"
    if v is not None:
        return c.fmt.format(v)
    return "-" if bound is None else ">" + c.fmt.format(bound)


def _delta(value: float | None, base: float | None) -> str | None:
    if value is None or base is None or base == 0:
        return None
    return f"{(value - base) / abs(base):+.0%}"


def card_delta(c: Card, d: DeploymentResults, base: DeploymentResults) -> str | None:
    """A card's change against the baseline (the card adds 'vs baseline'); None for a card that
    is not compared. For throughput, with the 95% interval of the paired comparison, part by
    part of the window (the same requests at the same times under an open loop or trace with
    run.duration_s; a closed loop shares the lengths and seed only)."""
    if not c.compare:
        return None
    paired = throughput_vs(d, base) if c.paired else None
    if paired is not None:
        return f"{paired[0] - 1:+.0%} ±{paired[1]:.0%}"
    value, base_value = c.value(d), c.value(base)
    if c.gpus is None or c.gpus(d) == c.gpus(base) or value is None or base_value is None:
        return _delta(value, base_value)
    delta = _delta(value / c.gpus(d), base_value / c.gpus(base))
    return None if delta is None else f"{delta} per GPU"


def row_head(d: DeploymentResults, layout: str | None, baseline: bool) -> str:
    """A card row's heading: name, layout, GPUs (per pool for PD, whose KV cards are the decode
    pool's), and whether it is the baseline."""
    parts = [f"**{d.name}**", *([layout] if layout else []), f"{d.gpus} GPUs"]
    if kv_pool(d) is not None:
        parts[-1] += " (" + " + ".join(f"{p.role} {p.gpus}" for p in d.pools) + ")"
        parts.append("KV cards: decode pool")
    return " · ".join(parts + (["baseline"] if baseline else []))


def _versus(delta: str) -> str:
    """'vs baseline' under a delta, shortened beside a long one (a card is ~170 px wide)."""
    return "vs baseline" if len(delta) <= 6 else "vs base"


def metric_cards(results: Results, layouts: Mapping[str, str] | None = None) -> None:
    """One row per deployment, one card per metric; deltas against the first deployment.
    `layouts` (deployment name -> `Deployment.layout`) heads each row."""
    deps = results.deployments
    base = deps[0]
    for d in deps:
        st.markdown(row_head(d, (layouts or {}).get(d.name), d is base))
        for col, c in zip(st.columns(len(CARDS)), CARDS, strict=True):
            delta = None if d is base else card_delta(c, d, base)
            col.metric(
                c.label, card_text(c, d), delta=delta, help=c.help,
                delta_description=None if delta is None else _versus(delta),
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


def overlap_saved(d: DeploymentResults) -> float | None:
    """Mean seconds per step that work run concurrently hid (negative: two-batch overlap cost
    time) in the pool whose steps the breakdown shows (the decode pool of a PD pair)."""
    if d.overlap_saved_s is not None:
        return d.overlap_saved_s
    return d.pools[-1].overlap_saved_s if d.pools else None


def step_parts(results: Results) -> dict[str, dict[str, float]]:
    """Per deployment, mean seconds per step by op and, where work ran concurrently, a segment
    of minus the time it hid, named by how (`overlap_row`: two-batch overlap, whose split can
    also cost time, or an engine's second stream), so the parts add up to the mean step time."""
    out: dict[str, dict[str, float]] = {}
    for d in results.deployments:
        parts = dict(d.step_breakdown_s)
        saved = overlap_saved(d)
        if saved:
            parts[d.overlap_row or charts.OVERLAP] = -saved
        out[d.name] = parts
    return out


def breakdown(results: Results, key: str) -> None:
    """Mean step time by op (with what concurrency hid); each op's legend names where
    its time came from."""
    steps = {d.name: d.step_time_s for d in results.deployments}
    fig = charts.step_breakdown(step_parts(results), op_sources(results), step_s=steps)
    st.plotly_chart(fig, key=f"{key}_breakdown")


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


def _round(value: float | None, digits: int, scale: float = 1.0) -> float | None:
    return None if value is None else round(value * scale, digits)


def details_rows(results: Results) -> list[dict[str, object]]:
    """The details table: times in ms and shares in % (as the cards), rounded."""
    rows: list[dict[str, object]] = []
    for d in results.deployments:
        r = d.requests
        rows.append(
            {
                "deployment": d.name,
                "GPUs": d.gpus,
                "step ms": _round(ms(d.step_time_s), 1),
                "decode batch/rank": _round(d.decode_batch_per_rank, 1),
                "KV util %": _round(d.kv_utilisation, 1, 100.0),
                "MTP accept len": _round(d.mtp_accept_len, 2),
                "done/arrived": f"{r.completed}/{r.arrived}",
                "queued": r.queued,
                "rejected": r.rejected,
                "SLO met": d.slo_met,
                "profile": d.profile,
            }
        )
    return rows


def details_table(results: Results) -> None:
    st.dataframe(details_rows(results), hide_index=True, key="results_details")


def roofline_only_note(results: Results) -> str | None:
    """A caption when no op time came from a kernel table: every figure is a roofline estimate
    (the launch row's per-kernel figure comes from one, but prices no kernel's work)."""
    sources = (src for d in results.deployments for op, src in d.step_sources.items()
               if op != LAUNCH_ROW)  # fmt: skip
    if any(src != "roofline" for src in sources):
        return None
    profiles = ", ".join(dict.fromkeys(d.profile for d in results.deployments))
    return (
        f"Every op time here is a roofline estimate ({profiles}): datasheet FLOP/s and bandwidth "
        "scaled by efficiency factors, not a kernel timed on this GPU. The Calibration page "
        "lists each factor and its source; a measured profile replaces them."
    )


def show(
    results: Results,
    samples: Mapping[str, Mapping[str, Sequence[float]]],
    key: str,
    layouts: Mapping[str, str] | None = None,
) -> None:
    """Everything a run shows, in reading order."""
    if note := roofline_only_note(results):
        st.caption(note)
    metric_cards(results, layouts)
    st.subheader("Latency distributions")
    latency_cdfs(samples, key)
    c1, c2 = st.columns([3, 2])
    with c1:
        breakdown(results, key)
    with c2:
        imbalance(results, key)
    details_table(results)
