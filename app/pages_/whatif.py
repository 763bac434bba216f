"""What-if page: one model, GPU and workload; deployments side by side; run and compare.

The page builds a `Scenario` from its widgets (the same spec `mlasim run` reads, and exports it
as that YAML), shows per-GPU memory at once, and simulates on demand. Each deployment is one
serving unit or a PD pair (separate prefill and decode pools). A load sweep (throughput
against offered load, points in parallel processes) and a capacity search (GPUs for a target
rate, `app.capacity_view`) are separate buttons.
"""

from __future__ import annotations

import hashlib
from typing import Any

import streamlit as st

from app import (
    capacity_view,
    charts,
    components,
    export,
    inputs,
    memory_view,
    run_panel,
    runner,
    sweep,
)
from app.state import forget_inputs
from sim.api import Curves, FieldError, parse_scenario, profile_names, resolve
from sim.specs.scenario import Scenario
from sim.specs.workload import ClosedWorkload

DEFAULT_PROFILE = "default: the GPU's <gpu>-roofline"
DATASHEET = "datasheet"  # the bare datasheet roofline (efficiency 1, no launch cost)
# The default study's two layouts (scenarios/default.yaml) under a closed loop that reaches
# steady state in seconds. The users ramp in and their answers vary, so they do not move in step
# (in step, every figure depended on where the window fell: throughput intervals of ±30-40%;
# spread out, ±2-5% over this 60 s window). 80 simulated seconds keep the Run click within 3 s
# on a busy 2-core machine: about 1 s of simulation for both layouts, against 1.4-1.6 s at 120 s.
DEFAULT: dict[str, Any] = {
    "name": "what_if",
    "deployments": [
        {"name": "tp8", "attn_tp": 8, "moe_tp": 8},
        {"name": "dp8_ep8", "attn_tp": 1, "moe_ep": 8},
    ],
    "workload": {
        "kind": "closed", "concurrency": 128, "ramp_s": 10.0,
        "input": {"kind": "fixed", "tokens": 2000},
        "output": {"kind": "lognormal", "mean_tokens": 200, "sigma": 0.5},
    },
    "slo": {"ttft_s": 3.0, "tpot_s": 0.1, "percentile": 90.0},
    "run": {"duration_s": 80.0, "warmup_s": 20.0, "seed": 1},
}  # fmt: skip
# The default traffic answers differently from scenarios/default.yaml; say why while it is shown.
DEFAULT_WORKLOAD_NOTE = (
    "Why this default can rank the layouts otherwise than scenarios/default.yaml: here 128 users "
    "send 2,000-token prompts for ~200-token answers, a prefill-heavy load whose KV fits even "
    "TP8's duplicated cache. TP8 then loses nothing to duplication, while every DP8 step pays "
    "for each GPU reading the whole attention projection for ~16 requests, for the expert "
    "all-to-all, and for prefills holding up its lock-step ranks (see the step breakdown). "
    "scenarios/default.yaml asks for ~1,000-token answers at 4 req/s: its requests live about "
    "a minute and fill TP8's KV, so TP8 queues (TTFT p90 ~17 s) where DP8 does not (~0.5 s), "
    "at about the same tokens per GPU."
)
KEPT_SWEEPS = 8  # load sweeps kept per session; the oldest goes first


# widget keys of the What-if form: cleared when a scenario YAML is loaded, so they start again
# from the loaded values
FORM_PREFIXES = ("wl_", "slo_", "run_", "dep", "wi_model", "wi_gpu", "wi_profile", "wi_count")


def _base() -> dict[str, Any]:
    """The form's starting values: a loaded scenario's, else DEFAULT."""
    loaded: dict[str, Any] | None = st.session_state.get("wi_loaded")
    return loaded or DEFAULT


def _load_yaml() -> None:
    """A scenario YAML dropped here becomes the form's starting values (deployments beyond four
    are left out, and said so)."""
    upload = st.file_uploader("load a scenario YAML", type=["yaml", "yml"], key="wi_yaml_file")
    if upload is None:
        return
    digest = hashlib.sha256(upload.getvalue()).hexdigest()
    if st.session_state.get("wi_yaml_digest") == digest:
        return
    try:
        sc = parse_scenario(upload.getvalue().decode(), upload.name)
    except (ValueError, UnicodeDecodeError) as exc:
        components.show_error(exc, f"{upload.name} is not a usable scenario:")
        return
    if sc.workload.kind == "trace":
        st.error(f"{upload.name}: trace workloads are not in the What-if form; use `mlasim run`")
        return
    data = sc.model_dump(mode="json")
    deps = data["deployments"][:4]
    if len(data["deployments"]) > 4:
        st.warning(f"{upload.name}: only the first four of its deployments are shown")
    if len(deps) == 1:
        deps.append({**deps[0], "name": f"{deps[0]['name']}_b"})
    forget_inputs(st.session_state, FORM_PREFIXES)
    st.session_state["wi_loaded"] = {
        "name": data["name"], "model": data["model"], "gpu": data["gpu"],
        "profile": data.get("profile"), "deployments": deps, "workload": data["workload"],
        "slo": data["slo"], "run": data["run"],
    }  # fmt: skip
    st.session_state["wi_yaml_digest"] = digest
    st.rerun()


def _setup() -> dict[str, Any] | None:
    """Model, GPU and profile pickers; None until a usable model is chosen."""
    base = _base()
    c1, c2, c3 = st.columns(3)
    with c1:
        picked = components.model_picker("wi_model", default=base.get("model", "deepseek-v3"))
    with c2:
        gpu = components.gpu_picker("wi_gpu", default=base.get("gpu", "h200"))
    with c3:
        names = [n for n in profile_names() if n != f"{gpu.name}-roofline"]
        profile = st.selectbox(
            "calibration profile",
            [DEFAULT_PROFILE.replace("<gpu>", gpu.name), DATASHEET, *names],
            key="wi_profile",
            help=Scenario.model_fields["profile"].description,
        )
    if picked is None:
        return None
    return {
        "model": picked[0],
        "gpu": gpu.name,
        "profile": None if profile.startswith("default:") else profile,
    }


def _traffic() -> dict[str, Any]:
    base = _base()
    with st.expander("Traffic, SLO and run length", expanded=True):
        workload = inputs.workload_form(base["workload"])
        return {"workload": workload, **inputs.slo_and_run_form(base["slo"], base["run"])}


def _run_and_show(scenario: Scenario) -> None:
    prompt = "Press Run to simulate these deployments (results are cached by scenario)."
    outcome = run_panel.run_and_show(scenario, "wi", prompt)
    if outcome is not None:
        run_panel.downloads(outcome.results, scenario.name, "wi")


def _sweep_section(scenario: Scenario) -> None:
    """The load-sweep button, and the curves of this scenario once swept (kept for the session
    by content hash, so other buttons and re-renders do not lose them)."""
    st.subheader("Throughput vs offered load")
    try:
        field, base = sweep.load_of(scenario)
    except ValueError as exc:
        st.info(str(exc))
        return
    kept: dict[str, Curves] = st.session_state.setdefault("wi_sweeps", {})
    key = runner.content_hash(scenario)
    loads = ", ".join(f"{base * f:g}" for f in sweep.DEFAULT_FACTORS)
    if st.button(f"Run load sweep ({field} = {loads})", key="wi_sweep") and key not in kept:
        bar = st.progress(0.0, text="waiting for worker processes")

        def on_point(k: int, n: int) -> None:
            bar.progress(k / n, text=f"{k} of {n} load points done")

        try:
            kept[key] = sweep.run_sweep(runner.pool().pool, scenario, on_point=on_point)
        except Exception as exc:  # shown in the page, never a traceback
            components.show_error(exc, "The load sweep could not run:")
            return
        finally:
            bar.empty()
        while len(kept) > KEPT_SWEEPS:
            kept.pop(next(iter(kept)))
    if key in kept:
        _show_sweep(kept[key], field)


def _show_sweep(curves: Curves, field: str) -> None:
    series = {
        name: [(p[field], p["output_tok_s_per_gpu"]) for p in pts] for name, pts in curves.items()
    }
    st.plotly_chart(
        charts.throughput_vs_load(series, x_label=field, y_label="output tok/s per GPU"),
        key="wi_fig_sweep",
    )
    st.dataframe(sweep.table_rows(curves, field), hide_index=True, key="wi_sweep_table")


def render() -> None:
    st.title("What-if")
    runner.pool()  # start the worker processes while the user is still choosing
    _load_yaml()
    setup = _setup()
    if setup is None:
        return
    traffic = _traffic()
    st.subheader("Deployments")
    base = _base()
    count = int(st.number_input("deployments to compare", 2, 4, len(base["deployments"]),
                                key="wi_count"))  # fmt: skip
    deployments = inputs.deployment_cards(base["deployments"], count)
    valid = [d for d in deployments if d is not None]
    if len(valid) < len(deployments):
        st.warning("Fix the deployment inputs above to run.")
        return
    raw = {
        "name": base["name"],
        **setup,
        **traffic,
        "deployments": [d.model_dump(mode="json") for d in valid],
    }
    scenario = components.validated(Scenario, raw, "The scenario")
    if not isinstance(scenario, Scenario):
        return
    try:  # its names, and the deployments against the model, as a file's are checked on load
        resolved = resolve(scenario, read_trace=False)
    except FieldError as exc:
        components.show_error(exc, "The scenario is invalid:")
        return
    scenario, model, gpu = resolved.scenario, resolved.model, resolved.gpu
    st.subheader("Per-GPU memory")
    memory_view.render_memory(model, gpu, valid)
    if setup["model"].endswith(".json"):
        st.caption(f"The YAML names the uploaded config by path ({setup['model']}); keep a copy "
                   "next to the scenario file and point `model:` at it.")  # fmt: skip
    st.download_button(
        "scenario YAML (for `mlasim run`)",
        export.scenario_yaml(scenario),
        file_name=f"{scenario.name}.yaml",
        mime="text/yaml",
        key="wi_dl_yaml",
    )
    st.subheader("Results")
    if scenario.workload == ClosedWorkload.model_validate(DEFAULT["workload"]):
        st.caption(DEFAULT_WORKLOAD_NOTE)
    runnable = _fitting(scenario, memory_view.unfit(model, gpu, valid), gpu.name)
    if runnable is None:
        return
    _run_and_show(runnable)
    _sweep_section(runnable)
    capacity_view.render(runnable)


def _fitting(scenario: Scenario, unfit: list[str], gpu: str) -> Scenario | None:
    """The scenario without the deployments that do not fit (their reasons are under Per-GPU
    memory); None, with a message, when none fits."""
    if not unfit:
        return scenario
    names = ", ".join(unfit)
    kept = [d for d in scenario.deployments if d.name not in unfit]
    if not kept:
        st.error(f"No deployment fits on {gpu} ({names}): see Per-GPU memory above for the fixes.")
        return None
    st.warning(
        f"Left out of the run: {names} (does not fit on {gpu}; see Per-GPU memory above). "
        f"The rest are simulated; {kept[0].name} is the baseline.",
        icon=":material/block:",
    )
    data = scenario.model_dump(mode="json")
    deps = [raw for raw, d in zip(data["deployments"], scenario.deployments, strict=True)
            if d.name not in unfit]  # fmt: skip
    return Scenario.model_validate(data | {"deployments": deps})
