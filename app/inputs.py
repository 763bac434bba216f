"""What-if inputs: workload, SLO, run length and deployments, turned into one `Scenario` dict.

A deployment card is one serving unit (`Deployment`) or a PD pair (`PdDeployment`: a prefill
pool's form, a decode pool's form and the KV link between them).

Every widget's help text is the spec field's description, so the page explains the same fields
the scenario YAML documents. Number boxes carry no bounds of their own: a value out of range
reaches the spec, whose message names the field (a bounded box would keep its last valid value
and run that while showing the typed one).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from app import components
from sim.specs.deployment import Deployment, PdDeployment
from sim.specs.scenario import RunSpec, Slo
from sim.specs.workload import ClosedWorkload, GammaWorkload, LognormalLength, PoissonWorkload

LOOPS = {
    "open loop (Poisson)": "poisson",
    "open loop (Gamma, bursty)": "gamma",
    "closed loop": "closed",
}
# Fields every deployment card shows; the rest of Deployment's fields sit under "more settings".
DEPLOYMENT_MAIN = [
    "name",
    "nodes",
    "attn_tp",
    "moe_tp",
    "kv_dtype",
    "mtp_draft_tokens",
    "mtp_acceptance",
    "dsa",
    "two_batch_overlap",
    "eplb_redundant_experts",
    "chunked_prefill_tokens",
]
# A card is one serving unit or a PD pair (prefill pool + decode pool, KV sent between them).
LAYOUTS = ("one unit", "PD pair")
LAYOUT_HELP = (
    "One unit serves prefill and decode on the same GPUs; a PD pair runs a prefill pool and a "
    "decode pool and moves each prompt's KV between them."
)
PD_POOLS = ("prefill", "decode")
# A pool's name and role are set by the pair, so its form leaves them out.
POOL_MAIN = [f for f in DEPLOYMENT_MAIN if f != "name"]


def _help(spec: type, field: str) -> str | None:
    return spec.model_fields[field].description  # type: ignore[attr-defined, no-any-return]


def _length(label: str, key: str, value: dict[str, Any], cols: list[Any]) -> dict[str, Any]:
    """A length distribution in two columns: fixed, or lognormal around a mean (sigma below)."""
    kinds = ["fixed", "lognormal"]
    kind = cols[0].selectbox(
        f"{label} length", kinds, index=kinds.index(value.get("kind", "fixed")), key=f"{key}_kind"
    )
    mean = int(value.get("tokens", value.get("mean_tokens", 1024)))
    tokens = int(cols[1].number_input(f"{label} tokens", value=mean, step=128, key=f"{key}_tokens"))
    if kind == "fixed":
        return {"kind": "fixed", "tokens": tokens}
    sigma = cols[0].number_input(
        f"{label} sigma", value=float(value.get("sigma", 0.5)), step=0.05,
        key=f"{key}_sigma", help=_help(LognormalLength, "sigma"),
    )  # fmt: skip
    return {"kind": "lognormal", "mean_tokens": float(tokens), "sigma": sigma}


def _load(kind: str, value: dict[str, Any], cols: list[Any]) -> dict[str, Any]:
    """Rate (open loop) or concurrency (closed loop), plus burstiness for gamma arrivals."""
    if kind == "closed":
        per_rank = cols[1].checkbox(
            "per rank", value=value.get("concurrency_per_rank") is not None,
            key="wl_per_rank", help=_help(ClosedWorkload, "concurrency_per_rank"),
        )  # fmt: skip
        field = "concurrency_per_rank" if per_rank else "concurrency"
        n = int(value.get("concurrency_per_rank") or value.get("concurrency") or 64)
        return {
            field: int(cols[0].number_input(field.replace("_", " "), value=n, key="wl_conc",
                                            help=_help(ClosedWorkload, field))),
            "ramp_s": cols[1].number_input("ramp (s)", value=float(value.get("ramp_s", 0.0)),
                                           key="wl_ramp",
                                           help=_help(ClosedWorkload, "ramp_s")),
        }  # fmt: skip
    out = {
        "rate_req_s": cols[0].number_input(
            "rate (req/s)", value=float(value.get("rate_req_s", 4.0)), key="wl_rate",
            help=_help(PoissonWorkload, "rate_req_s"),
        )
    }  # fmt: skip
    if kind == "gamma":
        out["cv"] = cols[1].number_input(
            "burstiness cv", value=float(value.get("cv", 2.0)), key="wl_cv",
            help=_help(GammaWorkload, "cv"),
        )  # fmt: skip
    return out


def workload_form(value: dict[str, Any]) -> dict[str, Any]:
    """Open or closed loop, rate or concurrency, lengths and prefix-cache hits, in one row."""
    kind = value.get("kind", "poisson")
    loop = st.radio(
        "traffic", list(LOOPS), index=list(LOOPS.values()).index(kind), horizontal=True,
        key="wl_loop",
    )  # fmt: skip
    cols = st.columns(7)
    out: dict[str, Any] = {"kind": LOOPS[loop], **_load(LOOPS[loop], value, cols[0:2])}
    out["input"] = _length("input", "wl_in", value.get("input", {}), cols[2:4])
    out["output"] = _length("output", "wl_out", value.get("output", {}), cols[4:6])
    out["prefix_cache_fraction"] = cols[6].number_input(
        "prefix-cache hits", value=float(value.get("prefix_cache_fraction", 0.0)), step=0.05,
        key="wl_prefix", help=_help(PoissonWorkload, "prefix_cache_fraction"),
    )  # fmt: skip
    return out


def slo_and_run_form(slo: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """SLO targets and run length in one row; help texts are the spec descriptions."""
    c = st.columns(6)
    sf, rf = Slo.model_fields, RunSpec.model_fields
    out_slo = {
        "ttft_s": c[0].number_input("TTFT target (s)", value=float(slo["ttft_s"]),
                                    key="slo_ttft", help=sf["ttft_s"].description),
        "tpot_s": c[1].number_input("TPOT target (s)", value=float(slo["tpot_s"]),
                                    step=0.01, format="%.3f", key="slo_tpot",
                                    help=sf["tpot_s"].description),
        "percentile": c[2].number_input("SLO percentile", value=float(slo["percentile"]),
                                        key="slo_pct", help=sf["percentile"].description),
    }  # fmt: skip
    out_run = {
        "duration_s": c[3].number_input("simulated seconds", value=float(run["duration_s"]),
                                        key="run_duration",
                                        help=rf["duration_s"].description),
        "warmup_s": c[4].number_input("warm-up (s)", value=float(run["warmup_s"]),
                                      key="run_warmup", help=rf["warmup_s"].description),
        "seed": int(c[5].number_input("seed", value=int(run["seed"]), key="run_seed",
                                      help=rf["seed"].description)),
    }  # fmt: skip
    return {"slo": out_slo, "run": out_run}


def deployment_cards(
    defaults: list[dict[str, Any]], count: int
) -> list[Deployment | PdDeployment | None]:
    """`count` deployment forms side by side, each one unit or a PD pair; None where a form does
    not validate (the message is shown in the card)."""
    out: list[Deployment | PdDeployment | None] = []
    for i, col in enumerate(st.columns(count)):
        base = defaults[i] if i < len(defaults) else {**defaults[-1], "name": f"dep{i + 1}"}
        with col:
            st.markdown(f"**Deployment {i + 1}**")
            layout = st.radio(
                "layout", LAYOUTS, index=int("prefill" in base), horizontal=True,
                key=f"dep{i}.layout", help=LAYOUT_HELP,
            )  # fmt: skip
            what = f"Deployment {i + 1}"
            dep = _unit(base, f"dep{i}", what) if layout == LAYOUTS[0] else _pd(base, i, what)
            if dep is not None:  # what the fields add up to, as they are edited
                st.caption(f"{dep.total_gpus} GPUs: {dep.layout}")
            out.append(dep)
    return out


def _unit(base: dict[str, Any], key: str, what: str) -> Deployment | None:
    raw = components.spec_form(Deployment, base, key, main=DEPLOYMENT_MAIN)
    dep = components.validated(Deployment, raw, what)
    return dep if isinstance(dep, Deployment) else None


def _pd(base: dict[str, Any], i: int, what: str) -> PdDeployment | None:
    """A PD pair: its name, the KV link and one form per pool. Each pool starts from `base` (a
    unit's layout, or the pool's own entry when `base` is a PD pair); the pair sets the roles."""
    fields = PdDeployment.model_fields
    name = st.text_input(
        "pair name", base["name"] if "prefill" in base else f"{base['name']}_pd",
        key=f"dep{i}.pd.name", help=fields["name"].description,
    )  # fmt: skip
    link = st.number_input(
        "KV transfer GB/s", value=float(base.get("kv_transfer_gb_s") or 0.0), step=5.0,
        key=f"dep{i}.pd.kv_transfer_gb_s",
        help=f"{fields['kv_transfer_gb_s'].description} 0 = the GPU's NIC.",
    )  # fmt: skip
    raw: dict[str, Any] = {"name": name, "kv_transfer_gb_s": link or None}
    for tab, pool in zip(st.tabs([f"{p} pool" for p in PD_POOLS]), PD_POOLS, strict=True):
        with tab:
            values = {**base.get(pool, base), "name": pool}
            raw[pool] = components.spec_form(
                Deployment, values, f"dep{i}.{pool}", main=POOL_MAIN, skip=("name", "role")
            )
    dep = components.validated(PdDeployment, raw, what)
    return dep if isinstance(dep, PdDeployment) else None
