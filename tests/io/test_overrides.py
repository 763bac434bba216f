"""`path=value` overrides: paths, deployment selection, YAML values and the errors users see."""

from __future__ import annotations

import pytest

from sim.io.overrides import (
    OverrideError,
    apply_overrides,
    parse_assignment,
    parse_value,
)
from tests.builders import tiny


def test_plain_paths_change_only_their_field() -> None:
    base = tiny()
    sc = apply_overrides(base, [("workload.rate_req_s", 40), ("run.duration_s", 60)])
    assert sc.workload.rate_req_s == 40  # type: ignore[union-attr]
    assert sc.run.duration_s == 60
    assert sc.model_copy(update={"workload": base.workload, "run": base.run}) == base


def test_deployment_by_name_index_and_star() -> None:
    sc = apply_overrides(tiny(), [parse_assignment("deployments.dp8_ep8.kv_dtype=fp8")])
    assert [d.kv_dtype for d in sc.deployments] == ["bf16", "fp8"]  # type: ignore[union-attr]
    sc = apply_overrides(tiny(), [parse_assignment("deployments.0.kv_dtype=fp8")])
    assert [d.kv_dtype for d in sc.deployments] == ["fp8", "bf16"]  # type: ignore[union-attr]
    sc = apply_overrides(
        tiny(),
        [
            parse_assignment("deployments.*.mtp_draft_tokens=1"),
            parse_assignment("deployments.*.mtp_acceptance=[0.85]"),
        ],
    )
    assert [d.mtp_draft_tokens for d in sc.deployments] == [1, 1]  # type: ignore[union-attr]
    assert sc.deployments[1].mtp_probs == (0.85,)  # type: ignore[union-attr]


def test_pd_pools_are_reached_through_their_deployment() -> None:
    pd = {
        "name": "pd",
        "prefill": {"name": "p", "attn_tp": 8, "moe_tp": 8},
        "decode": {"name": "d", "attn_tp": 1, "moe_ep": 8},
    }
    sc = apply_overrides(tiny(deployments=[pd]), [("deployments.pd.decode.kv_dtype", "fp8")])
    assert sc.deployments[0].decode.kv_dtype == "fp8"  # type: ignore[union-attr]
    with pytest.raises(OverrideError, match=r"known keys are .*decode.*prefill"):
        apply_overrides(tiny(deployments=[pd]), [("deployments.*.kv_dtype", "fp8")])


def test_yaml_values() -> None:
    assert parse_value("40") == 40 and parse_value("2.5") == 2.5 and parse_value("1e3") == 1000.0
    assert parse_value("true") is True and parse_value("null") is None
    assert parse_value("fp8") == "fp8" and parse_value("[1, 2]") == [1, 2]
    assert parse_assignment("run.seed = 7") == ("run.seed", 7)


def test_unknown_key_lists_the_keys_at_that_level() -> None:
    with pytest.raises(OverrideError) as exc:
        apply_overrides(tiny(), [("workload.rate", 1)])
    msg = str(exc.value)
    assert "'rate' under workload" in msg and "rate_req_s" in msg and "input" in msg
    with pytest.raises(OverrideError, match=r"known keys are .*duration_s.*seed"):
        apply_overrides(tiny(), [("run.length_s", 1)])


def test_unknown_deployment_lists_names() -> None:
    with pytest.raises(OverrideError, match=r"'dp_ep'.*tp8, dp8_ep8.*'\*'"):
        apply_overrides(tiny(), [("deployments.dp_ep.kv_dtype", "fp8")])
    with pytest.raises(OverrideError, match="whole entry"):
        apply_overrides(tiny(), [("deployments.tp8", 1)])
    with pytest.raises(OverrideError, match="not a section"):
        apply_overrides(tiny(), [("run.seed.x", 1)])


def test_invalid_value_shows_the_field_error() -> None:
    with pytest.raises(OverrideError) as exc:
        apply_overrides(tiny(), [("deployments.*.kv_dtype", "fp9")])
    msg = str(exc.value)
    assert "deployments.tp8.kv_dtype" in msg and "'bf16' or 'fp8'" in msg
    assert "deployments.*.kv_dtype='fp9'" in msg
    with pytest.raises(OverrideError, match=r"workload\.rate_req_s: Input should be greater"):
        apply_overrides(tiny(), [("workload.rate_req_s", -1)])
    with pytest.raises(OverrideError, match="attn_tp=3 must divide"):
        apply_overrides(tiny(), [("deployments.tp8.attn_tp", 3)])


def test_bad_syntax() -> None:
    for text in ("workload.rate_req_s", "=3", "workload..rate_req_s=3"):
        with pytest.raises(OverrideError, match=r"PATH=VALUE|empty part"):
            apply_overrides(tiny(), [parse_assignment(text)])
    with pytest.raises(OverrideError, match="not valid YAML"):
        parse_value("[1, 2")
