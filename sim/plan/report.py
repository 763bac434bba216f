"""A plan's outputs: the top-K table as rows of text, and the Pareto page (Plotly HTML).

The page plots tok/s per GPU against tok/s per user for every simulated candidate, those meeting
the SLO apart from those missing it, with the frontier drawn through the best. It is written as
self-contained HTML (plotly.js inlined: it opens offline). No PNG: a static image needs kaleido
and a browser, which the project does not install.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sim.io.journal import write_atomic
from sim.plan.planner import Plan, pareto

PNG_NOTE = "PNG not written: static export needs kaleido, which is not installed (HTML only)"
TOP_COLUMNS = (
    "#", "GPU", "layout", "copies", "GPUs", "tok/s/GPU", "tok/s/user", "TTFT {p} s",
    "TPOT {p} ms", "SLO met", "$/hour", "$/M tok",
)  # fmt: skip


def _num(v: float | None, digits: int = 3, scale: float = 1.0) -> str:
    return (
        "-"
        if v is None
        else f"{v * scale:,.{digits}g}"
        if abs(v * scale) < 1000
        else f"{v * scale:,.0f}"
    )


def top_rows(plan: Plan) -> list[list[str]]:
    """The top-K table's cells, in TOP_COLUMNS order."""
    out = []
    for i, r in enumerate(plan.top, start=1):
        out.append([
            str(i), r["gpu"], r["layout"], str(r["replicas"]), str(r["gpus"]),
            _num(r.get("output_tok_s_per_gpu")), _num(r.get("tok_s_per_user")),
            _num(r.get("ttft_s")), _num(r.get("tpot_s"), 3, 1e3),
            "yes" if r.get("slo_met") else "no",
            _num(r.get("usd_per_hour"), 4), _num(r.get("usd_per_m_tokens"), 3),
        ])  # fmt: skip
    return out


def columns(plan: Plan) -> list[str]:
    p = f"p{plan.request.slo.percentile:g}"
    return [c.format(p=p) for c in TOP_COLUMNS]


def pareto_figure(plan: Plan) -> Any:
    """The Plotly figure of the frontier (needs plotly, the `app` extra)."""
    import plotly.graph_objects as go

    sim = [r for r in plan.rows if r.get("output_tok_s_per_gpu")]
    fig = go.Figure()
    for met, colour in ((True, "#2ca02c"), (False, "#bbbbbb")):
        pts = [r for r in sim if bool(r.get("slo_met")) == met]
        fig.add_trace(go.Scatter(
            x=[r.get("tok_s_per_user") for r in pts], y=[r["output_tok_s_per_gpu"] for r in pts],
            mode="markers", name="meets the SLO" if met else "misses the SLO",
            marker={"color": colour, "size": 8},
            text=[f"{r['gpu']} {r['layout']} x{r['replicas']} ({r['gpus']} GPUs)" for r in pts],
            hovertemplate="%{text}<br>%{x:.1f} tok/s/user, %{y:.0f} tok/s/GPU<extra></extra>",
        ))  # fmt: skip
    front = pareto(sim)
    fig.add_trace(go.Scatter(
        x=[r["tok_s_per_user"] for r in front], y=[r["output_tok_s_per_gpu"] for r in front],
        mode="lines", name="Pareto frontier", line={"color": "#1f77b4"},
    ))  # fmt: skip
    req = plan.request
    target = f"{req.rate_req_s:g} req/s" if req.rate_req_s else f"{req.users} users"
    fig.update_layout(
        title=f"{req.model} on {', '.join(req.gpus)}: tok/s per GPU against tok/s per user "
        f"({target})",
        xaxis_title="output tok/s per user (1 / mean TPOT)",
        yaxis_title="output tok/s per GPU",
        template="plotly_white",
    )
    return fig


def write_outputs(plan: Plan, out_dir: str | Path) -> list[Path]:
    """plan.json, scenario.yaml (the top rows as a runnable scenario, when any met the SLO) and
    pareto.html under `out_dir` (HTML only where plotly is installed)."""
    import json

    from sim.plan.scenario_out import scenario_yaml

    d = Path(out_dir)
    paths = [write_atomic(d / "plan.json", json.dumps(plan.to_json(), indent=1) + "\n")]
    text = scenario_yaml(plan)
    if text is not None:
        paths.append(write_atomic(d / "scenario.yaml", text))
    try:
        fig = pareto_figure(plan)
    except ImportError:
        return paths
    html = fig.to_html(include_plotlyjs=True, full_html=True)
    paths.append(write_atomic(d / "pareto.html", html))
    return paths
