"""Scenarios page: open a study from `scenarios/`, edit its YAML, run it, check its `expect:` lines,
download the YAML and the results.

The edited text is parsed exactly as `mlasim run` parses a file (`sim.io.scenario_io`), with
paths relative to the original file's folder, so what runs here runs the same from the CLI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st
import yaml

from app import run_panel, runner
from sim.api import (
    ExpectError,
    ProbeError,
    Results,
    ScenarioError,
    build_namespace,
    compute_probes,
    expect,
    parse_scenario,
    results_dict,
)
from sim.specs.scenario import Scenario

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
SCENARIO_KEYS = ("deployments", "model", "workload")


def scenario_files(folder: Path = SCENARIOS) -> list[Path]:
    """YAML files under `folder` that look like scenarios (mappings with scenario keys)."""
    out = []
    for p in sorted(folder.rglob("*.y*ml")):
        try:
            data = yaml.safe_load(p.read_text())
        except yaml.YAMLError:
            data = {"model": None}  # broken files are listed, so their error can be seen
        if isinstance(data, dict) and any(k in data for k in SCENARIO_KEYS):
            out.append(p)
    return out


def expectation_rows(text: str, results: Results) -> list[dict[str, Any]]:
    """Each `expect:` line of the file with its verdict (probes computed as `mlasim check` does)."""
    raw = yaml.safe_load(text) or {}
    exprs = raw.get("expect") or []
    if not exprs:
        return []
    try:
        ns = build_namespace(
            results_dict(results), compute_probes(raw.get("probes"), raw.get("profile"))
        )
    except (ExpectError, ProbeError) as exc:
        return [{"expectation": "(namespace)", "ok": False, "detail": str(exc)}]
    rows = []
    for e in exprs:
        try:
            ok = expect.check(e, ns)
            detail = "" if ok else expect.explain(e, ns)
        except ExpectError as exc:
            ok, detail = False, str(exc)
        rows.append({"expectation": e, "ok": ok, "detail": detail})
    return rows


def _summary(sc: Scenario) -> None:
    profile = sc.profile or f"{sc.gpu}-roofline (default)"
    st.caption(
        f"**{sc.name}** · {sc.model} on {sc.gpu} · profile {profile} · "
        f"workload {sc.workload.kind} · deployments: {', '.join(d.name for d in sc.deployments)}"
    )
    if sc.description:
        st.markdown(sc.description)


def _results(sc: Scenario, text: str) -> None:
    outcome = run_panel.run_and_show(sc, "sc", "Press Run to simulate this scenario.")
    if outcome is None:
        return
    rows = expectation_rows(text, outcome.results)
    if rows:
        passed = sum(r["ok"] for r in rows)
        st.subheader(f"Expectations: {passed} of {len(rows)} hold")
        st.dataframe(rows, hide_index=True, key="sc_expect")
    run_panel.downloads(outcome.results, sc.name, "sc")


def render() -> None:
    st.title("Scenarios")
    runner.pool()  # start the worker processes while the user is still choosing
    files = scenario_files()
    if not files:
        st.info(f"No scenario files under {SCENARIOS}.")
        return
    labels = [str(p.relative_to(SCENARIOS)) for p in files]
    default = labels.index("default.yaml") if "default.yaml" in labels else 0
    label = st.selectbox("scenario file", labels, index=default, key="sc_file")
    path = files[labels.index(label)]
    text = st.text_area(
        "YAML (edit freely; the file on disk is not changed)",
        path.read_text(),
        height=360,
        key=f"sc_text_{label}",
    )
    st.download_button(
        "download this YAML", text, file_name=path.name, mime="text/yaml", key="sc_dl_yaml"
    )
    try:
        sc = parse_scenario(text, path)
    except ScenarioError as exc:
        st.error(
            "This scenario does not load:\n\n"
            + "\n\n".join(
                f"line {p.line}: {p.field}: {p.message}" if p.line else f"{p.field}: {p.message}"
                for p in exc.problems
            )
        )
        return
    _summary(sc)
    _results(sc, text)
