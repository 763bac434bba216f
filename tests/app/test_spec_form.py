"""Spec forms: fields typed as fixed name lists become select boxes offering exactly those names."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from sim.api import policy_names
from sim.specs.deployment import MLA_POLICY_NAMES, ROUTER_NAMES


def _deployment_form() -> None:
    from app import components
    from sim.specs import Deployment

    fields = ["mla_policy", "router", "kv_dtype", "weight_dtype", "dense_ffn"]
    components.spec_form(Deployment, {"router": "least_kv"}, "d", main=fields)


def test_name_list_fields_offer_their_literal_names() -> None:
    at = AppTest.from_function(_deployment_form).run()
    assert not at.exception, at.exception
    options = {s.key: list(s.options) for s in at.selectbox}
    assert options["d.mla_policy"] == list(MLA_POLICY_NAMES)
    assert sorted(options["d.mla_policy"]) == policy_names()  # every policy the cost model has
    assert options["d.router"] == list(ROUTER_NAMES)
    assert options["d.kv_dtype"] == ["bf16", "fp8"]
    assert options["d.weight_dtype"] == ["bf16", "fp8", "fp4"]
    assert options["d.dense_ffn"] == ["tp", "dp", "unit"]
    values = {s.key: s.value for s in at.selectbox}
    assert values["d.router"] == "least_kv" and values["d.mla_policy"] == "sglang"


def test_error_text_is_shown_as_written_not_as_markdown() -> None:
    from app.components import plain

    shown = plain("calling '__import__' is not allowed; 2 * x_y * 3 costs $5")
    assert "\\_\\_import\\_\\_" in shown and "2 \\* x\\_y \\* 3" in shown and "\\$5" in shown
