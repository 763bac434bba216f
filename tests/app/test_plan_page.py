"""Plan page: the quick search, its Pareto chart, top-K, verdict and launch commands; and the
What-if fixes found with it (inputs survive a page switch)."""

from __future__ import annotations

from app_helpers import figures, open_page

from app.state import kept_keys


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
    assert "slo_ttft" in at.session_state
    at.sidebar.radio(key="page").set_value("What-if").run()
    assert not at.exception
    assert at.number_input(key="slo_ttft").value == 4.5


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
