"""The validation report: Markdown and one self-contained Plotly HTML page, from the journal.

Everything is a function of the rows read, the coverage reasons and the journal's records, so
the same run (or a resumed one) gives the same report.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sim.io.journal import write_atomic
from sim.validate.mapping import Uncovered
from sim.validate.stats import GROUP_KEYS, METRICS, by_group, errors, headline, ranking, rel_err

SIM_ERROR = "simulation refused"
WORST = 20


def summary(
    total: int, uncovered: Sequence[Uncovered], records: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """The report's figures as one JSON-able dict (records in id order)."""
    ok = sorted((r for r in records if r["status"] == "ok"), key=lambda r: r["id"])
    failed = sorted((r for r in records if r["status"] != "ok"), key=lambda r: r["id"])
    reasons = Counter(u.reason for u in uncovered)
    reasons.update({SIM_ERROR: len(failed)} if failed else {})
    worst = sorted(ok, key=lambda r: -max(abs(rel_err(r, m)) for m in METRICS))[:WORST]
    return {
        "rows": total,
        "simulated": len(ok),
        "coverage": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
        "uncovered": [[u.row_id, u.reason, u.detail] for u in uncovered]
        + [[r["id"], SIM_ERROR, r["error"]] for r in failed],
        "overall": errors(ok),
        "headline": headline(ok),
        "groups": [{**dict(zip(GROUP_KEYS, k, strict=True)), **v} for k, v in by_group(ok).items()],
        "ranking": {m: ranking(ok, m) for m in ("tpot_ms", "tok_s_per_gpu")},
        "worst": [r["id"] for r in worst],
        "records": ok,
        "wall_s_total": round(sum(r["wall_s"] for r in records), 1),
    }


def _f(v: float | None, nd: int = 1) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def markdown(s: dict[str, Any], title: str) -> str:
    """The report as Markdown."""
    by_id = {r["id"]: r for r in s["records"]}
    h = s["headline"]
    lines = [
        f"# {title}",
        "",
        f"{s['simulated']} of {s['rows']} rows simulated. TTFT MAPE {_f(h['ttft_mape'])}%, "
        f"TPOT MAPE {_f(h['tpot_mape'])}%, ranking agreement by TPOT {_f(h['rank_tpot'])}% "
        f"and by output tok/s per GPU {_f(h['rank_tok_s'])}%.",
        "",
        "## Coverage",
        "",
        "| rows | reason |",
        "|---:|---|",
        f"| {s['simulated']} | simulated |",
        *(f"| {n} | {reason} |" for reason, n in s["coverage"].items()),
        "",
        "## Error per (GPU, engine, mode, precision)",
        "",
        "MAPE and signed mean error (predicted - measured, % of measured); tok/s is output "
        "tokens per second per GPU from TTFT and TPOT as a closed loop of the row's users.",
        "",
        "| GPU | engine | mode | precision | rows | TTFT MAPE | TTFT bias | TPOT MAPE | "
        "TPOT bias | tok/s MAPE | tok/s bias |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for g in s["groups"]:
        cells = [g[k] for k in GROUP_KEYS] + [g["count"]]
        cells += [_f(g[f"{m}_{x}"]) for m in METRICS for x in ("mape", "bias")]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines += ["", "## Ranking agreement", ""]
    for metric, rk in s["ranking"].items():
        lines.append(
            f"- by {metric}: {_f(rk['agreement'])}% of {rk['pairs']} pairs ordered as measured"
        )
        for a, b, gap in rk["inversions"][:5]:
            ra, rb = by_id[a], by_id[b]
            lines.append(
                f"  - inverted (measured {gap:.2f}x apart): `{a}` ({ra['layout']}: measured "
                f"{ra[f'meas_{metric}']:.4g}, predicted {ra[f'pred_{metric}']:.4g}) vs `{b}` "
                f"({rb['layout']}: measured {rb[f'meas_{metric}']:.4g}, predicted "
                f"{rb[f'pred_{metric}']:.4g})"
            )
    lines += ["", f"## The {WORST} worst rows", ""]
    for rid in s["worst"]:
        lines += _row_detail(by_id[rid])
    lines += [
        "## Every row",
        "",
        "| id | layout | profile | TTFT meas / pred ms | TPOT meas / pred ms | "
        "tok/s/GPU meas / pred | wall s |",
        "|---|---|---|---|---|---|---:|",
    ]
    for r in s["records"]:
        lines.append(
            f"| `{r['id']}` | {r['layout']} | {r['profile']} | {r['meas_ttft_ms']:.0f} / "
            f"{r['pred_ttft_ms']:.0f} | {r['meas_tpot_ms']:.2f} / {r['pred_tpot_ms']:.2f} | "
            f"{r['meas_tok_s_per_gpu']:.1f} / {r['pred_tok_s_per_gpu']:.1f} | {r['wall_s']} |"
        )
    lines += ["", "## Rows not simulated", "", "| id | reason | detail |", "|---|---|---|"]
    lines += [f"| `{i}` | {reason} | {d} |" for i, reason, d in s["uncovered"]]
    return "\n".join(lines) + "\n"


def _row_detail(r: dict[str, Any]) -> list[str]:
    out = [
        f"### `{r['id']}`",
        "",
        f"{r['model']} on {r['gpus']} x {r['gpu']}, {r['engine']} {r['backend_version']} "
        f"{r['mode']}, {r['layout']}; {r['concurrency']} users, ISL {r['isl']} / OSL "
        f"{r['osl']}; profile {r['profile']}. TTFT {r['meas_ttft_ms']:.0f} -> "
        f"{r['pred_ttft_ms']:.0f} ms, TPOT {r['meas_tpot_ms']:.2f} -> {r['pred_tpot_ms']:.2f} ms.",
        "",
    ]
    for p in r["pools"]:
        top = sorted(p["step_breakdown_s"].items(), key=lambda kv: -kv[1])[:8]
        ops = "; ".join(
            f"{op} {1000 * t:.2f} ms ({p['step_sources'].get(op, '?')})" for op, t in top
        )
        out += [f"- {p['name']} step {1000 * (p['step_time_s'] or 0):.2f} ms: {ops}", ""]
    return out


def html(s: dict[str, Any], title: str) -> str:
    """One self-contained page (plotly.js inline): predicted vs measured, log-log, ±10%."""
    try:
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots
    except ImportError:
        raise ValueError("the HTML report needs plotly: pip install 'mlasim[app]'") from None
    fig = make_subplots(rows=1, cols=3, subplot_titles=("TTFT ms", "TPOT ms", "tok/s per GPU"))
    for col, m in enumerate(METRICS, start=1):
        recs = s["records"]
        meas = [r[f"meas_{m}"] for r in recs]
        if not meas:
            continue
        lo, hi = min(meas + [r[f"pred_{m}"] for r in recs]), max(meas)
        hi = max(hi, *(r[f"pred_{m}"] for r in recs))
        for k, dash in ((1.0, "solid"), (0.9, "dot"), (1.1, "dot")):
            fig.add_trace(
                go.Scatter(
                    x=[lo, hi],
                    y=[k * lo, k * hi],
                    mode="lines",
                    showlegend=False,
                    line=dict(color="grey", dash=dash),
                ),
                row=1,
                col=col,
            )
        fig.add_trace(
            go.Scatter(
                x=meas,
                y=[r[f"pred_{m}"] for r in recs],
                mode="markers",
                text=[f"{r['id']}<br>{r['layout']}<br>{r['profile']}" for r in recs],
                name=m,
            ),
            row=1,
            col=col,
        )
        fig.update_xaxes(type="log", title_text="measured", row=1, col=col)
        fig.update_yaxes(type="log", title_text="predicted", row=1, col=col)
    fig.update_layout(title=title, height=520)
    body = fig.to_html(full_html=False, include_plotlyjs=True)
    cov = "".join(f"<li>{n}: {reason}</li>" for reason, n in s["coverage"].items())
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head><body>"
        f"<h1>{title}</h1><p>{s['simulated']} of {s['rows']} rows simulated.</p><ul>{cov}</ul>"
        f"{body}</body></html>"
    )


def write_report(out_dir: str | Path, s: dict[str, Any], title: str) -> list[Path]:
    """report.md, report.html and summary.json in `out_dir` (each written atomically)."""
    d = Path(out_dir)
    return [
        write_atomic(d / "report.md", markdown(s, title)),
        write_atomic(d / "report.html", html(s, title)),
        write_atomic(d / "summary.json", json.dumps(s, indent=1, sort_keys=True) + "\n"),
    ]


DOCS_START = "<!-- aic-baseline:start (generated by mlasim validate --docs) -->"
DOCS_END = "<!-- aic-baseline:end -->"


def docs_section(s: dict[str, Any], command: str) -> str:
    """The generated block of docs/validation.md: coverage, per-group errors, ranking."""
    md = markdown(s, "x").split("\n")
    keep_from = md.index("## Coverage")
    keep_to = md.index(f"## The {WORST} worst rows")
    body = [line.replace("## ", "### ", 1) if line.startswith("## ") else line for line in md]
    return "\n".join(
        [
            DOCS_START,
            "",
            f"Regenerate with `{command}`.",
            "",
            md[2],
            "",
            *body[keep_from:keep_to],
            DOCS_END,
        ]
    )


def update_docs(path: str | Path, section: str) -> Path:
    """Replace the generated block of `path` (appended at the end the first time)."""
    p = Path(path)
    text = p.read_text()
    if DOCS_START in text and DOCS_END in text:
        head, rest = text.split(DOCS_START, 1)
        tail = rest.split(DOCS_END, 1)[1]
        text = head + section + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    return write_atomic(p, text)
