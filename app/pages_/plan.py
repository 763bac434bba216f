"""Plan page: the planner (`mlasim plan`) in the browser.

Model, GPU types, traffic, SLO and a load target in; the Pareto frontier of tok/s per GPU
against tok/s per user, the top-K table with GPUs and $, the aggregated-vs-disaggregated
verdict and the launch commands out. Plans are kept for the session by their request, so
switching pages and back shows the last one again.
"""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from app import components, runner
from sim.api import (
    PNG_NOTE,
    PlanRequest,
    ProcessBackend,
    gpu_names,
    make_plan,
    pareto_figure,
    plan_columns,
    plan_top_rows,
)

# 'quick': a handful of layouts (seconds); 'default': the CLI's default space (minutes)
QUICK_SPACE: dict[str, Any] = {
    "nodes": [1], "attn_tp": [1, 8], "moe": ["ep"], "mtp_draft_tokens": [0],
    "kv_dtype": ["fp8"], "pd": False, "loads": 2,
}  # fmt: skip
SEARCHES = {"quick (4 candidates)": QUICK_SPACE, "default (as mlasim plan)": {}}
KEPT_PLANS = 4


def _request() -> dict[str, Any] | None:
    c1, c2 = st.columns(2)
    with c1:
        picked = components.model_picker("plan_model", allow_upload=False)
    with c2:
        gpus = st.multiselect("GPU types", gpu_names(), default=["h200"], key="plan_gpus")
    c = st.columns(4)
    isl = c[0].number_input("prompt tokens (isl)", 1, 200_000, 1000, key="plan_isl")
    osl = c[1].number_input("answer tokens (osl)", 1, 32_000, 100, key="plan_osl")
    ttft = c[2].number_input("TTFT target s", 0.01, 600.0, 2.0, key="plan_ttft")
    tpot = c[3].number_input("TPOT target ms", 1.0, 10_000.0, 60.0, key="plan_tpot")
    c = st.columns(4)
    pct = c[0].number_input("percentile", 1.0, 100.0, 90.0, key="plan_pct")
    rate = c[1].number_input("target rate req/s", 0.01, 100_000.0, 6.0, key="plan_rate")
    price = c[2].number_input("$ per GPU-hour (0: price table)", 0.0, 1000.0, 0.0, key="plan_price")
    top = c[3].number_input("top K", 1, 50, 5, key="plan_top")
    search = st.radio("search", list(SEARCHES), horizontal=True, key="plan_search")
    if picked is None or not gpus:
        st.info("Pick a model and at least one GPU type.")
        return None
    return {
        "model": picked[0], "gpus": gpus,
        "input": {"kind": "fixed", "tokens": int(isl)},
        "output": {"kind": "fixed", "tokens": int(osl)},
        "slo": {"ttft_s": ttft, "tpot_s": tpot / 1e3, "percentile": pct},
        "rate_req_s": rate, "gpu_hour_usd": price or None, "top": int(top),
        "space": SEARCHES[search],
    }  # fmt: skip


def render() -> None:
    st.title("Plan")
    st.caption(
        "Searches layouts (attention TP x DP, MoE EP or TP, MTP, KV dtype, PD or not, replicas), "
        "prunes what cannot fit or meet the SLO, simulates the rest and ranks what meets it by "
        "cost. The same search as `mlasim plan`."
    )
    runner.pool()
    raw = _request()
    if raw is None:
        return
    req = components.validated(PlanRequest, raw, "The plan request")
    if not isinstance(req, PlanRequest):
        return
    kept: dict[str, Any] = st.session_state.setdefault("plan_results", {})
    key = json.dumps(req.model_dump(mode="json"), sort_keys=True)
    if st.button("Plan", type="primary", key="plan_go") and key not in kept:
        bar = st.progress(0.0, text="pruning and starting workers")

        def tick(done: int, total: int) -> None:
            bar.progress(done / max(total, 1), text=f"{done} of {total} candidates simulated")

        try:
            with ProcessBackend(executor=runner.pool().pool) as backend:
                kept[key] = make_plan(req, backend, progress=tick)
        except Exception as exc:  # shown in the page, never a traceback
            components.show_error(exc, "The plan could not run:")
            return
        finally:
            bar.empty()
        while len(kept) > KEPT_PLANS:
            kept.pop(next(iter(kept)))
    if key not in kept:
        st.info("Press Plan to search (results are kept for the session by request).")
        return
    _show(kept[key])


def _show(plan: Any) -> None:
    removed = ", ".join(f"{k} {v}" for k, v in plan.removed.items())
    st.write(f"Searched {plan.space_size} candidates: pruned {removed}; simulated "
             f"{plan.simulated} in {plan.wall_s:.0f} s.")  # fmt: skip
    st.plotly_chart(pareto_figure(plan), key="plan_fig_pareto")
    st.caption(PNG_NOTE.replace("PNG not written", "No PNG"))
    rows = plan_top_rows(plan)
    cols = plan_columns(plan)
    st.subheader("Top candidates")
    st.dataframe([dict(zip(cols, r, strict=True)) for r in rows], hide_index=True,
                 key="plan_table")  # fmt: skip
    st.markdown(f"**Verdict:** {components.plain(plan.verdict)}")
    if plan.best is None:
        return
    b = plan.best
    target = plan.request.rate_req_s
    cost = "" if b["usd_per_hour"] is None else f", ${b['usd_per_hour']:,.0f}/hour"
    st.markdown(f"**GPUs for {target:g} req/s:** {b['gpus']} {b['gpu']}{cost}")
    if b["kind"] == "pd":
        pre, dec = b["spec"]["prefill"], b["spec"]["decode"]
        p_gpus = pre["nodes"] * pre["gpus_per_node"] * pre["replicas"] * b["replicas"]
        d_gpus = dec["nodes"] * dec["gpus_per_node"] * dec["replicas"] * b["replicas"]
        st.markdown(f"**Prefill : decode GPUs:** {p_gpus} : {d_gpus}")
    st.subheader("Launch commands")
    for i, r in enumerate(plan.top, start=1):
        with st.expander(f"#{i} {r['gpu']} {r['layout']} x{r['replicas']}", expanded=i == 1):
            for engine, cmds in r["launch"].items():
                st.caption(engine)
                for c in cmds:
                    st.code(c, language="bash", wrap_lines=True)  # long flags stay visible
