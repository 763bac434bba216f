"""Plan page: the quick search, its Pareto chart, top-K, verdict and launch commands; and the
What-if fixes found with it (inputs survive a page switch)."""

from __future__ import annotations

from app_helpers import figures, open_page

from app.pages_.scenarios import SCENARIOS
from app.state import STORE, forget_inputs, keep_inputs, kept_keys


def test_plan_page_quick_search_shows_chart_table_and_commands() -> None:
    at = open_page("Plan")
    assert any("Press Plan" in i.value for i in at.info)
    at.button(key="plan_go").click().run()
    assert not at.exception and not at.error, at.error
    figs = figures(at)
    assert any(t.get("name") == "Pareto frontier" for f in figs for t in f["data"])
    codes = [c.value for c in at.code]
    assert any("\npython -m sglang.launch_server" in f"\n{c}" for c in codes), codes
    assert any("\nvllm serve" in f"\n{c}" for c in codes), codes
    assert any("Verdict" in m.value for m in at.markdown)
    assert any("GPUs for 6 req/s" in m.value for m in at.markdown)


def test_whatif_inputs_survive_a_page_switch() -> None:
    at = open_page("What-if")
    at.number_input(key="slo_ttft").set_value(4.5).run()
    at.sidebar.radio(key="page").set_value("Physics").run()
    assert at.session_state[STORE]["slo_ttft"] == 4.5  # Streamlit forgot it; the store did not
    at.sidebar.radio(key="page").set_value("What-if").run()
    assert not at.exception
    assert at.number_input(key="slo_ttft").value == 4.5


def test_an_ordinary_rerun_never_sends_a_kept_input_to_the_browser() -> None:
    """A widget the app sets is sent to the browser with its run's value, which overwrites a
    box being typed into while that run is under way; only the run that draws a forgotten
    widget again may do that."""
    at = open_page("What-if")
    box = lambda: at.number_input(key="slo_ttft")  # noqa: E731
    box().set_value(4.5).run()
    at.run()
    assert box().value == 4.5 and not box().proto.set_value
    at.sidebar.radio(key="page").set_value("Physics").run()
    at.sidebar.radio(key="page").set_value("What-if").run()
    assert box().value == 4.5 and box().proto.set_value  # drawn again: the browser is told
    at.run()
    assert box().value == 4.5 and not box().proto.set_value


def test_kept_inputs_come_back_only_when_forgotten_and_forget_inputs_drops_them() -> None:
    state: dict[str, object] = {"slo_ttft": 3.0, "dep0.attn_tp": 4, "wi_run": True}
    keep_inputs(state)
    assert state[STORE] == {"slo_ttft": 3.0, "dep0.attn_tp": 4}
    del state["slo_ttft"]  # what Streamlit does once a run has not drawn the widget
    state["dep0.attn_tp"] = 2  # typed in the browser
    keep_inputs(state)
    assert state["slo_ttft"] == 3.0 and state["dep0.attn_tp"] == 2
    assert state[STORE] == {"slo_ttft": 3.0, "dep0.attn_tp": 2}
    forget_inputs(state, ("dep",))
    keep_inputs(state)
    assert "dep0.attn_tp" not in state and state["slo_ttft"] == 3.0


def test_a_loaded_scenario_replaces_what_was_typed() -> None:
    at = open_page("What-if")
    at.number_input(key="dep0.attn_tp").set_value(4).run()
    at.sidebar.radio(key="page").set_value("Physics").run()  # kept in the store now
    at.sidebar.radio(key="page").set_value("What-if").run()
    assert at.number_input(key="dep0.attn_tp").value == 4
    text = (SCENARIOS / "default.yaml").read_bytes()
    at.file_uploader(key="wi_yaml_file").set_value(("default.yaml", text, "text/yaml")).run()
    assert not at.exception, at.exception
    assert at.number_input(key="dep0.attn_tp").value == 8  # the file's, not the kept 4
    at.run()
    assert at.number_input(key="dep0.attn_tp").value == 8


def test_buttons_uploads_and_downloads_are_never_kept() -> None:
    state = {"wi_run": False, "wi_model_file": None, "wi_dl_yaml": False, "slo_ttft": 3.0,
             "dep0.attn_tp": 8, "wi_fig_sweep": {"selection": {}}, "plan_go": False,
             "other": 1}  # fmt: skip
    assert sorted(kept_keys(state)) == ["dep0.attn_tp", "slo_ttft"]


def test_each_op_keeps_its_own_colour_across_figures() -> None:
    from app.charts import step_breakdown
    from app.op_colours import KNOWN_OPS, op_colour

    assert len({op_colour(op) for op in KNOWN_OPS}) == len(KNOWN_OPS)
    three = {n: {"attn_decode": 0.01, "moe_routed": 0.02, "ep_dispatch": 0.003} for n in "abc"}
    one = {"x": {"moe_routed": 0.02, "attn_decode": 0.01}}
    colours = [
        {t.name.split()[0]: t.marker.color for t in step_breakdown(b, {}).data}
        for b in (three, one)
    ]
    assert colours[0]["moe_routed"] == colours[1]["moe_routed"] == op_colour("moe_routed")
    assert colours[0]["attn_decode"] == colours[1]["attn_decode"]
