"""What-if inputs the page must refuse or work around: out-of-range values are named by the
spec (and nothing runs), and a deployment that does not fit is left out of the run, not in the
way of the others."""

from __future__ import annotations

import pytest
from app_helpers import error, open_page


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("wl_conc", 0, "concurrency"),
        ("wl_in_tokens", -5, "input"),
        ("run_duration", 0.0, "duration_s"),
        ("dep0.chunked_prefill_tokens", 10, "chunked_prefill_tokens"),
        ("dep0.attn_tp", -4, "attn_tp"),
    ],
)
def test_out_of_range_value_is_named_and_not_run(key: str, value: float, field: str) -> None:
    at = open_page("What-if")
    box = at.number_input(key=key)
    assert box.proto.has_min is False  # the spec, not the widget, bounds the value
    box.set_value(value).run()
    assert not at.exception
    assert at.error and field in error(at)
    assert not any(b.key == "wi_run" for b in at.button)  # nothing to run until it is fixed


def test_a_deployment_that_does_not_fit_is_left_out_once() -> None:
    at = open_page("What-if")
    at.selectbox(key="wi_model").set_value("kimi-k2").run()  # dp8_ep8 cannot hold K2's weights
    at.number_input(key="run_duration").set_value(30.0).run()
    at.button(key="wi_run").click().run()
    assert not at.exception and not at.error
    texts = [w.value for w in at.warning]
    assert sum("'dp8_ep8' does not fit on h200" in t for t in texts) == 1  # the reason, once
    assert any(t.startswith("Left out of the run: dp8_ep8") for t in texts)
    labels = [m.label for m in at.metric]
    assert labels.count("out tok/s/GPU") == 1  # tp8, which fits, has its cards
    assert float(at.metric[0].value.split()[0].replace(",", "")) > 0


def test_no_run_is_offered_when_nothing_fits() -> None:
    at = open_page("What-if")
    at.selectbox(key="wi_model").set_value("kimi-k2").run()
    at.number_input(key="dep0.attn_tp").set_value(1).run()  # tp8 as DP8 without EP: no fit
    at.number_input(key="dep0.moe_tp").set_value(1).run()
    assert not at.exception
    assert "No deployment fits on h200" in error(at)
    assert not any(b.key == "wi_run" for b in at.button)
