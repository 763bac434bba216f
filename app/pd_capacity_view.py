"""PD pairs' pools sized apart, in the What-if page's capacity section.

`sim.search.pd_capacity` searches each pool of a PD pair alone (prefill within the SLO's TTFT
less the KV transfer, decode within the TPOT target) and gives units of each for the target
rate. One row per pair shows what `mlasim capacity` prints for it: each pool's maximum rate,
latency, units and GPUs, the prefill : decode GPU ratio, and GPUs in all against whole pairs.
"""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from app.units import ms
from sim.api import CapacityReport, CapacityResult, PdPoolsResult


def ratio(prefill_gpus: int | None, decode_gpus: int | None) -> str | None:
    """'1 : 2' for 8 prefill and 16 decode GPUs; None when a pool has no count."""
    if prefill_gpus is None or decode_gpus is None:
        return None
    g = math.gcd(prefill_gpus, decode_gpus) or 1
    return f"{prefill_gpus // g} : {decode_gpus // g}"


def _row(pd_: PdPoolsResult, whole: CapacityResult, pct: str) -> dict[str, object]:
    p, d = pd_.prefill, pd_.decode
    return {
        "deployment": pd_.deployment,
        "prefill max req/s": p.max_rate_req_s,
        f"prefill TTFT {pct} ms": ms(p.ttft_s),
        "prefill units": p.replicas,
        "prefill GPUs each unit": p.gpus_per_deployment,
        "prefill GPUs": p.gpus,
        "decode max req/s": d.max_rate_req_s,
        f"decode TPOT {pct} ms": ms(d.tpot_s),
        "decode units": d.replicas,
        "decode GPUs each unit": d.gpus_per_deployment,
        "decode GPUs": d.gpus,
        "prefill : decode GPUs": ratio(p.gpus, d.gpus),
        "GPUs (pools sized apart)": pd_.gpus,
        "GPUs (whole pairs)": whole.gpus,
        "prefill TTFT budget ms": ms(pd_.prefill_ttft_budget_s),
        "KV transfer ms": ms(pd_.kv_transfer_s),
        "runs": p.runs + d.runs,
        "status": f"{p.status} / {d.status}",
    }


COUNTS = (
    "prefill units", "prefill GPUs", "decode units", "decode GPUs", "GPUs (pools sized apart)",
    "GPUs (whole pairs)",
)  # fmt: skip


def pools_table(report: CapacityReport) -> pd.DataFrame:
    """One row per PD pair of the report (empty when it has none)."""
    pct = f"p{report.slo.percentile:g}"
    pairs = {d.deployment: d for d in report.deployments}
    rows = [_row(p, pairs[p.deployment], pct) for p in report.pd_pools]
    table = pd.DataFrame(rows)
    return table.astype(dict.fromkeys(COUNTS, "Int64")) if rows else table  # missing: empty


def show(report: CapacityReport) -> None:
    """The table and each pool's note; nothing when the report has no PD pair."""
    if not report.pd_pools:
        return
    slo, pct = report.slo, f"p{report.slo.percentile:g}"
    st.markdown(f"**PD pools sized apart for {report.target_rate_req_s:g} req/s**")
    st.caption(
        f"Each pool is searched alone: prefill within {pct} TTFT <= the SLO's {slo.ttft_s:g} s "
        f"less the KV transfer, decode within {pct} TPOT <= {slo.tpot_s * 1e3:g} ms. Units = "
        "ceil(target / the pool's maximum rate); whole pairs are copies of the pair as set, "
        "searched as one."
    )
    st.dataframe(
        pools_table(report),
        hide_index=True,
        key="wi_cap_pd_table",
        column_config={
            c: st.column_config.NumberColumn(format="%.4g")
            for c in ("prefill max req/s", "decode max req/s")
        }
        | {
            c: st.column_config.NumberColumn(format="%.1f")
            for c in (f"prefill TTFT {pct} ms", f"decode TPOT {pct} ms", "prefill TTFT budget ms")
        }
        | {"KV transfer ms": st.column_config.NumberColumn(format="%.3g")},
    )
    for pair in report.pd_pools:
        for r in (pair.prefill, pair.decode):
            st.caption(f"{r.deployment}: {r.note}")
