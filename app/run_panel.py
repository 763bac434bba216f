"""The Run button of a page: simulate on demand (cached per scenario), show, offer downloads.

Shared by the What-if and Scenarios pages; `key` prefixes every widget key ('wi', 'sc').
"""

from __future__ import annotations

import streamlit as st

from app import components, export, results_view, runner
from sim.api import Results, resolve, run_notes
from sim.specs.scenario import Scenario


def run_and_show(scenario: Scenario, key: str, prompt: str) -> runner.RunOutcome | None:
    """Once Run was pressed for this scenario's content, simulate it and show the results;
    None before that, or when the run fails (the error is shown in the page)."""
    ran: set[str] = st.session_state.setdefault(f"{key}_ran", set())
    digest = runner.content_hash(scenario)
    if st.button("Run", type="primary", key=f"{key}_run"):
        ran.add(digest)
    if digest not in ran:
        st.info(prompt)
        return None
    try:
        outcome = runner.run(scenario)
    except Exception as exc:  # any failure of the run is shown in the page, never a traceback
        components.show_error(exc, "The simulation could not run:")
        return None
    st.caption(outcome.summary)
    resolved = resolve(scenario, read_trace=False)  # the profile and model the notes read
    for note in run_notes(scenario, outcome.results, resolved.profile, resolved.model):
        st.warning(components.plain(note), icon=":material/info:")
    layouts = {d.name: d.layout for d in scenario.deployments}
    results_view.show(outcome.results, outcome.samples, key=key, layouts=layouts)
    return outcome


def downloads(results: Results, name: str, key: str) -> None:
    """Results as JSON (the `mlasim run --json` contract) and CSV."""
    c1, c2 = st.columns(2)
    c1.download_button(
        "results JSON",
        export.results_json(results),
        file_name=f"{name}.json",
        mime="application/json",
        key=f"{key}_dl_json",
    )
    c2.download_button(
        "results CSV",
        export.results_csv(results),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"{key}_dl_csv",
    )
