"""Plotly figure builders: pure functions from numbers to figures, no Streamlit, no simulation.

Keeping them free of Streamlit lets tests inspect the traces a page would draw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from numpy.typing import ArrayLike

from app.op_colours import op_colour
from sim.api import LAUNCH_ROW, OVERLAP_ROWS, TWO_BATCH_OVERLAP_ROW, IntensityRow

FAMILY_COLOURS = {"MHA": "#9aa0a6", "GQA": "#1f77b4", "MQA": "#2ca02c", "MLA": "#d62728"}
MEMORY_COLOURS = {
    "weights": "#4c78a8",
    "activations": "#bab0ac",
    "KV (unique)": "#54a24b",
    "KV (duplicated)": "#e45756",
    "free": "#eeeeee",
}


def marker_line(
    fig: go.Figure, x: float, text: str, *, logx: bool, dash: str = "dot", y: float = 0.98
) -> None:
    """A labelled vertical line. Annotations on a log axis take log10(x), shapes take x: Plotly's
    add_vline(annotation_text=...) mixes the two and stretches the axis to 10^x."""
    fig.add_vline(x=x, line_dash=dash, line_color="black", line_width=1)
    fig.add_annotation(
        x=float(np.log10(x)) if logx else x, y=y, yref="paper", text=text, showarrow=False,
        xanchor="left", yanchor="top" if y > 0.5 else "bottom", xshift=4,
    )  # fmt: skip


def _layout(
    fig: go.Figure, title: str, x: str, y: str, *, logx: bool = False, logy: bool = False
) -> go.Figure:
    fig.update_layout(
        title=title,
        xaxis_title=x,
        yaxis_title=y,
        margin={"l": 50, "r": 20, "t": 50, "b": 45},
        legend={"orientation": "h", "y": -0.2},
        height=380,
    )
    fig.update_xaxes(automargin=True)  # long tick labels grow the margin, never cut
    fig.update_yaxes(automargin=True)
    if logx:
        fig.update_xaxes(type="log", dtick=1)  # decades only: no 2, 5 minor labels
    if logy:
        fig.update_yaxes(type="log", dtick=1)
    return fig


def absorb_vs_expand(
    q: ArrayLike,
    expand_gflops: ArrayLike,
    absorb_gflops: ArrayLike,
    *,
    prefix_tokens: int,
    crossover: float | None,
) -> go.Figure:
    """Per-layer FLOPs of both MLA paths over new tokens after a fixed prefix."""
    fig = go.Figure()
    x = np.asarray(q, dtype=float)
    fig.add_scatter(x=x, y=np.asarray(expand_gflops), name="expand (MHA path)", mode="lines")
    fig.add_scatter(x=x, y=np.asarray(absorb_gflops), name="absorb (MLA path)", mode="lines")
    if crossover is not None:
        marker_line(fig, crossover, f"crossover q* = {crossover:.0f}", logx=True, dash="dash")
    return _layout(
        fig,
        f"One layer, {prefix_tokens:,} cached prefix tokens",
        "new tokens q",
        "GFLOPs per layer",
        logx=True,
        logy=True,
    )


def roofline(
    *,
    peak_tflops: float,
    bandwidth_tb_s: float,
    gpu_label: str,
    points: Sequence[IntensityRow],
) -> go.Figure:
    """Roofline of one GPU with decode-attention points (family, s_query, flop_per_byte)."""
    ridge = peak_tflops / bandwidth_tb_s
    ais = [p.flop_per_byte for p in points]
    x = np.logspace(-0.5, np.log10(max([*ais, ridge]) * 4.0), 200)
    fig = go.Figure()
    fig.add_scatter(
        x=x,
        y=np.minimum(peak_tflops, x * bandwidth_tb_s),
        mode="lines",
        name=gpu_label,
        line={"color": "black"},
    )
    marker_line(fig, ridge, f"ridge {ridge:.0f} FLOP/B", logx=True, y=0.02)
    for family in dict.fromkeys(p.family for p in points):
        rows = [p for p in points if p.family == family]
        ai = [p.flop_per_byte for p in rows]
        fig.add_scatter(
            x=ai,
            y=[min(peak_tflops, a * bandwidth_tb_s) for a in ai],
            mode="markers+text",
            name=family,
            text=[f"S={p.s_query}" for p in rows],
            textposition="top center",
            marker={"size": 10, "color": FAMILY_COLOURS.get(family.split()[0])},
        )
    return _layout(
        fig,
        f"Decode attention on {gpu_label} (BF16)",
        "arithmetic intensity, FLOP/byte",
        "attainable TFLOP/s",
        logx=True,
        logy=True,
    )


def dsa_cost(
    context: ArrayLike,
    series: Mapping[str, ArrayLike],
    *,
    unit: str,
    topk: int,
) -> go.Figure:
    """Decode cost per layer against context length for several attention variants."""
    fig = go.Figure()
    for name, ys in series.items():
        fig.add_scatter(x=np.asarray(context), y=np.asarray(ys), name=name, mode="lines")
    marker_line(fig, topk, f"top-k {topk}", logx=True)
    return _layout(
        fig,
        "Decode, one layer, one query token",
        "context length L (tokens)",
        unit,
        logx=True,
        logy=True,
    )


def memory_bars(rows: Sequence[Mapping[str, float | str]], *, hbm_note: str = "") -> go.Figure:
    """Stacked per-GPU memory (GB) of each deployment: weights, activations, KV, duplicated KV.
    `hbm_note` (the GPU's HBM in GB and GiB, the usable part) follows the axis unit."""
    fig = go.Figure()
    names = [str(r["name"]) for r in rows]
    for part, colour in MEMORY_COLOURS.items():
        fig.add_bar(
            y=names,
            x=[float(r[part]) for r in rows],
            name=part,
            orientation="h",
            marker_color=colour,
            text=[f"{float(r[part]):.1f}" for r in rows],
        )
    fig.update_layout(barmode="stack", legend={"traceorder": "normal"})
    _layout(fig, "Per-GPU memory", "GB (10^9 bytes)" + (f" · {hbm_note}" if hbm_note else ""), "")
    # legend above, on the right: below, it would cover the axis title
    legend = {"traceorder": "normal", "orientation": "h", "x": 1, "xanchor": "right", "y": 1.02}
    fig.update_layout(legend=legend | {"yanchor": "bottom"}, height=140 + 60 * len(rows))
    return fig


def latency_cdf(samples: Mapping[str, Sequence[float]], *, metric: str) -> go.Figure:
    """Empirical CDF of one latency metric (samples in seconds) for each deployment, drawn in
    milliseconds as the cards show them."""
    fig = go.Figure()
    lo, hi = np.inf, -np.inf
    for name, values in samples.items():
        v = np.sort(np.asarray(values, dtype=float)) * 1e3
        if v.size == 0:
            continue
        lo, hi = min(lo, v[0]), max(hi, v[-1])
        fig.add_scatter(x=v, y=np.arange(1, v.size + 1) / v.size, name=name, mode="lines")
    if np.isfinite(lo):  # pad, so a deployment whose requests all took the same time shows
        pad = max(hi - lo, hi * 0.1, 1e-3) * 0.05
        fig.update_xaxes(range=[lo - pad, hi + pad])
    else:  # empty axes would read as a plotting fault
        did = "got a first token" if metric == "TTFT" else "completed"
        fig.add_annotation(
            text=f"No request in the window {did}: no {metric} to draw (see the notes above).",
            x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False, font={"size": 14},
        )  # fmt: skip
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
    return _layout(fig, f"{metric} distribution", f"{metric} (ms)", "fraction of requests")


def throughput_vs_load(
    curves: Mapping[str, Sequence[tuple[float, float]]],
    *,
    x_label: str,
    y_label: str,
) -> go.Figure:
    """One line per deployment through (offered load, achieved throughput) points."""
    fig = go.Figure()
    for name, pts in curves.items():
        pts = sorted(pts)
        fig.add_scatter(
            x=[p[0] for p in pts], y=[p[1] for p in pts], name=name, mode="lines+markers"
        )
    return _layout(fig, "Throughput vs offered load", x_label, y_label)


# the step breakdown's segments for what concurrency hid or added (`overlap_row`, one of
# `OVERLAP_ROWS`): drawn last
OVERLAP = TWO_BATCH_OVERLAP_ROW


def overlap_label(row: str) -> str:
    return f"{row} [- saved, + added]" if row == TWO_BATCH_OVERLAP_ROW else f"{row} [- saved]"


OVERLAP_LABEL = overlap_label(OVERLAP)


def step_breakdown(
    breakdown: Mapping[str, Mapping[str, float]],
    sources: Mapping[str, str],
    *,
    step_s: Mapping[str, float | None] | None = None,
) -> go.Figure:
    """Stacked bar per deployment of seconds per op; each op's legend entry carries its label
    from `sources` (where its time came from, e.g. "published, extrapolated"). `OVERLAP_ROWS`
    entries (two-batch overlap, an engine's second stream) come last, hatched: negative, they
    are drawn down from the ops' top to the step time. With one, `step_s` (mean step time per
    deployment) marks each step time."""
    fig = go.Figure()
    named = (op for ops_ in breakdown.values() for op in ops_ if op not in OVERLAP_ROWS)
    ops = sorted(dict.fromkeys(named), key=lambda op: op == LAUNCH_ROW)  # launches on top
    names = list(breakdown)
    for op in ops:
        fig.add_bar(
            x=names,
            y=[breakdown[n].get(op, 0.0) * 1e3 for n in names],
            name=f"{op} [{sources.get(op, '?')}]",
            marker={"color": op_colour(op)},
        )
    drawn = [row for row in OVERLAP_ROWS if any(row in b for b in breakdown.values())]
    for row in drawn:
        y = [breakdown[n].get(row, 0.0) * 1e3 for n in names]
        fig.add_bar(
            x=names, y=y, name=overlap_label(row), text=[f"{v:+.1f} ms" if v else "" for v in y],
            marker={"color": "rgba(0,0,0,0.25)", "pattern": {"shape": "/"}},
        )  # fmt: skip
    if drawn and step_s is not None:  # where the stack ends once a negative part drew downwards
        times = [step_s.get(n) for n in names]
        fig.add_scatter(
            x=names, y=[None if t is None else t * 1e3 for t in times], name="step time",
            mode="markers", marker={"symbol": "line-ew-open", "size": 40, "color": "black"},
        )  # fmt: skip
    fig.update_layout(barmode="stack")  # stacked in order: a negative part draws downwards
    _layout(fig, "Mean step time by op [time source]", "", "ms per step")
    # many ops with their sources: the legend goes beside the bars, a column per op, so three or
    # more deployments keep their bars wide and no entry is cut
    fig.update_layout(legend={"orientation": "v", "x": 1.02, "y": 1.0}, height=460,
                      margin={"l": 50, "r": 20, "t": 50, "b": 80})  # fmt: skip
    fig.update_xaxes(automargin=True, tickangle=0)
    return fig


def bar(
    values: Mapping[str, float], *, title: str, y_label: str, ref: float | None = None
) -> go.Figure:
    """A plain bar per deployment, with an optional reference line (e.g. perfect balance = 1)."""
    fig = go.Figure()
    fig.add_bar(x=list(values), y=list(values.values()), text=[f"{v:.3g}" for v in values.values()])
    if ref is not None:
        fig.add_hline(y=ref, line_dash="dot")
    return _layout(fig, title, "", y_label)


def measured_vs_roofline(
    x: Sequence[float],
    measured_us: Sequence[float],
    roofline_us: Sequence[float],
    *,
    x_label: str,
    title: str,
    p10: Sequence[float | None] | None = None,
    p90: Sequence[float | None] | None = None,
) -> go.Figure:
    """One op's measured latency (with its p10-p90 spread) against the datasheet roofline."""
    fig = go.Figure()
    err = None
    if p10 is not None and p90 is not None and all(v is not None for v in [*p10, *p90]):
        m = np.asarray(measured_us, dtype=float)
        err = {
            "type": "data",
            "symmetric": False,
            "array": np.asarray(p90, dtype=float) - m,
            "arrayminus": m - np.asarray(p10, dtype=float),
        }
    fig.add_scatter(
        x=list(x), y=list(measured_us), name="measured p50", mode="lines+markers", error_y=err
    )
    fig.add_scatter(
        x=list(x), y=list(roofline_us), name="roofline", mode="lines", line={"dash": "dash"}
    )
    return _layout(fig, title, x_label, "latency (µs)", logx=True, logy=True)


def crossover_curves(
    new_tokens: Sequence[float],
    absorb_us: Sequence[float],
    expand_us: Sequence[float],
    *,
    prefix_tokens: int,
    measured: float | None,
    analytic: float,
) -> go.Figure:
    """Measured absorb and expand latency of an extend after one prefix, with both crossovers."""
    fig = go.Figure()
    fig.add_scatter(
        x=list(new_tokens), y=list(expand_us), name="expand (measured)", mode="lines+markers"
    )
    fig.add_scatter(
        x=list(new_tokens), y=list(absorb_us), name="absorb (measured)", mode="lines+markers"
    )
    if measured is not None:
        marker_line(fig, measured, f"measured {measured:.0f}", logx=True, dash="solid")
    marker_line(fig, analytic, f"FLOPs q* {analytic:.0f}", logx=True, y=0.02)
    return _layout(
        fig,
        f"Extend after a {prefix_tokens:,}-token prefix",
        "new tokens",
        "latency (µs)",
        logx=True,
        logy=True,
    )


def capacity_probes(
    probes: Mapping[str, Sequence[tuple[float, float | None, bool]]],
    *,
    metric: str,
    slo_ms: float,
) -> go.Figure:
    """A capacity search's probes: latency (ms) at each probed rate, one trace per deployment
    (circles met the SLO, crosses missed it), and the SLO target as a dashed line."""
    fig = go.Figure()
    for name, pts in probes.items():
        pts = sorted(pts, key=lambda p: p[0])
        fig.add_scatter(
            x=[p[0] for p in pts], y=[p[1] for p in pts], name=name, mode="lines+markers",
            marker={"symbol": ["circle" if p[2] else "x" for p in pts], "size": 9},
            text=["meets the SLO" if p[2] else "misses the SLO" for p in pts],
            hovertemplate="%{x:.4g} req/s: %{y:.4g} ms, %{text}",
        )  # fmt: skip
    fig.add_hline(
        y=slo_ms, line_dash="dash", line_color="black", line_width=1,
        annotation_text=f"SLO {slo_ms:g} ms", annotation_position="top left",
    )  # fmt: skip
    _layout(fig, f"{metric} at each probed rate (o meets the SLO, x misses)",
            "arrival rate (req/s)", f"{metric} (ms)")  # fmt: skip
    rates = [p[0] for pts in probes.values() for p in pts if p[0] > 0]
    ticks = _ticks_125(min(rates), max(rates)) if rates else []
    # a search often spans one decade: label 1-2-3-5 steps, not only decades
    fig.update_xaxes(type="log", **({"tickvals": ticks} if len(ticks) >= 2 else {}))
    return fig


def _ticks_125(lo: float, hi: float) -> list[float]:
    """1, 2, 3, 5 x 10^k values within [lo, hi] (widened 10% each way), for a log axis."""
    lo, hi = lo / 1.1, hi * 1.1
    k = int(np.floor(np.log10(lo)))
    out: list[float] = []
    while 10.0**k <= hi:
        out += [m * 10.0**k for m in (1, 2, 3, 5) if lo <= m * 10.0**k <= hi]
        k += 1
    return [float(f"{v:.6g}") for v in out]
