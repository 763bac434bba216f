"""The `expect:` evaluator: whitelisted syntax only, correct values, actionable messages."""

from __future__ import annotations

from typing import Any

import pytest

from sim.checks.expect import ExpectError, check, evaluate, explain, parse, sides
from sim.checks.namespace import build_namespace, ident

RESULTS: dict[str, Any] = {
    "scenario": "demo",
    "slo_tpot_s": 0.05,
    "deployments": [
        {
            "name": "dp-ep",
            "gpus": 8,
            "output_tok_s_per_gpu": 1234.5,
            "ttft_s": {"mean": 1.0, "p50": 0.5, "p90": 2.0, "p99": 3.0},
            "tpot_s": {"mean": 0.03, "p50": 0.03, "p90": 0.034, "p99": 0.05},
            "kv_dup_factor": 1,
            "mtp_accept_len": None,
            "step_breakdown_s": {"moe.dispatch": 0.001, "attn": 0.004},
            "note": "a string",
        },
        {"name": "tp", "gpus": 8, "output_tok_s_per_gpu": 1000.0, "kv_dup_factor": 8},
    ],
}


@pytest.fixture
def ns() -> dict[str, Any]:
    return build_namespace(RESULTS, {"q_star": 171.3, "probe": {"path": {"absorb": True}}})


HOSTILE = [
    "__import__('os')",
    "__import__('os').system('true')",
    "().__class__.__bases__",
    "tp.__class__",
    "tp.__dict__",
    "_private > 1",
    "open('x')",
    "getattr(tp, 'gpus')",
    "eval('1')",
    "exec('1')",
    "compile('1', 'f', 'eval')",
    "[x for x in y]",
    "{x for x in y}",
    "{x: 1 for x in y}",
    "(x for x in y)",
    "lambda: 1",
    "a[0]",
    "tp.gpus[0]",
    "'s' * 10**9",
    "'abc'",
    "b'abc'",
    "f'{tp.gpus}'",
    "(y := 1)",
    "1 if tp.gpus else 0",
    "tp.gpus.bit_length()",
    "abs.__call__(1)",
    "max(*[1, 2])",
    "round(x=1)",
    "[1, 2]",
    "(1, 2)",
    "{1: 2}",
    "None",
    "...",
    "1j",
    "tp.gpus in (8,)",
    "tp.gpus is 8",
    "~tp.gpus",
    "tp.gpus << 2",
    "tp.gpus // 2",
    "tp.gpus & 1",
    "a @ b",
    "1 +",
    "tp.gpus = 8",
    "import os",
    "",
    "   ",
    "x" * 1001,
    "+".join(["1"] * 200),
]


@pytest.mark.parametrize("expr", HOSTILE)
def test_hostile_expressions_are_rejected(expr: str, ns: dict[str, Any]) -> None:
    with pytest.raises(ExpectError):
        check(expr, ns)


def test_huge_exponents_are_bounded(ns: dict[str, Any]) -> None:
    with pytest.raises(ExpectError, match="exponent"):
        evaluate("9**9**9", ns)
    with pytest.raises(ExpectError, match="exponent"):
        evaluate("2 ** 65", ns)
    with pytest.raises(ExpectError, match="overflow"):
        evaluate("(10**60) ** 60", ns)
    assert evaluate("2 ** 10", ns) == 1024.0
    assert evaluate("4 ** -0.5", ns) == 0.5


def test_rejection_message_names_the_construct_and_the_whitelist() -> None:
    with pytest.raises(ExpectError) as err:
        parse("a[0] > 1")
    msg = str(err.value)
    assert "indexing" in msg and "rel_err" in msg and "comparisons" in msg
    with pytest.raises(ExpectError, match="calling 'open'"):
        parse("open('x')")
    with pytest.raises(ExpectError, match="leading underscore"):
        parse("tp.__class__")


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("dp_ep.output_tok_s_per_gpu > 1.2 * tp.output_tok_s_per_gpu", True),
        ("dp_ep.output_tok_s_per_gpu > 1.5 * tp.output_tok_s_per_gpu", False),
        ("tp.kv_dup_factor == 8 and dp_ep.kv_dup_factor == 1", True),
        ("tp.kv_dup_factor == 8 and not dp_ep.kv_dup_factor == 1", False),
        ("tp.kv_dup_factor != 8 or dp_ep.gpus == 8", True),
        ("rel_err(dp_ep.tpot_s.p90, 0.034) < 0.1", True),
        ("0.5 <= dp_ep.ttft_s.p50 < dp_ep.ttft_s.p90 <= dp_ep.ttft_s.p99", True),
        ("0.5 < dp_ep.ttft_s.p50 < 9", False),
        ("abs(-tp.gpus) == 8 and min(1, 2, 3) == 1 and max(1, 5) == 5", True),
        ("round(q_star) == 171 and round(q_star, 1) == 171.3", True),
        ("sqrt(16) == 4 and abs(log(2.718281828459045) - 1) < 1e-12", True),
        ("(tp.gpus + 2) * 3 - 10 / 4 % 3 == 27.5", True),
        ("-tp.gpus ** 2 == -64", True),
        ("probe.path.absorb", True),
        ("dp_ep.tpot_s.p90 < scenario.slo_tpot_s", True),
        ("dp_ep.step_breakdown_s.moe_dispatch < dp_ep.step_breakdown_s.attn", True),
    ],
)
def test_evaluation(expr: str, value: bool, ns: dict[str, Any]) -> None:
    assert check(expr, ns) is value


def test_multiline_expression_is_joined(ns: dict[str, Any]) -> None:
    assert check("tp.gpus == 8\n and dp_ep.gpus == 8", ns)


def test_non_boolean_expectation_is_an_error(ns: dict[str, Any]) -> None:
    assert evaluate("tp.gpus * 2", ns) == 16
    with pytest.raises(ExpectError, match="not true/false"):
        check("tp.gpus * 2", ns)


def test_unknown_top_level_name_lists_available(ns: dict[str, Any]) -> None:
    with pytest.raises(ExpectError) as err:
        check("dp.gpus == 8", ns)
    msg = str(err.value)
    assert "'dp'" in msg and "available: dp_ep, probe, q_star, scenario, tp" in msg


def test_unknown_nested_key_lists_keys_at_that_level(ns: dict[str, Any]) -> None:
    with pytest.raises(ExpectError) as err:
        check("dp_ep.ttft_s.p95 < 1", ns)
    msg = str(err.value)
    assert "no 'p95' under 'dp_ep.ttft_s'" in msg and "mean, p50, p90, p99" in msg


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        ("dp_ep.mtp_accept_len > 1", "is null"),
        ("dp_ep.note == 1", "is a string, not a number"),
        ("dp_ep.ttft_s > 1", "keys under it: mean, p50, p90, p99"),
        ("tp.gpus.real > 1", "'tp.gpus' is a number"),
        ("tp.gpus / (tp.gpus - 8) > 1", "division by zero"),
        ("rel_err(1, 0) < 1", "reference b is 0"),
        ("log(-1) < 1", "log(-1)"),
        ("rel_err(1) < 1", "takes 2..2 arguments"),
    ],
)
def test_evaluation_errors_say_why(expr: str, fragment: str, ns: dict[str, Any]) -> None:
    with pytest.raises(ExpectError) as err:
        check(expr, ns)
    assert fragment in str(err.value)


def test_explain_substitutes_every_name(ns: dict[str, Any]) -> None:
    expr = "dp_ep.output_tok_s_per_gpu > 1.5 * tp.output_tok_s_per_gpu"
    assert explain(expr, ns) == (
        "dp_ep.output_tok_s_per_gpu (1234.5) > 1.5 * tp.output_tok_s_per_gpu (1000)"
    )
    shown = explain("rel_err(dp_ep.tpot_s.p90, 0.034) < 0.1 and probe.path.absorb", ns)
    assert shown == "rel_err(dp_ep.tpot_s.p90 (0.034), 0.034) < 0.1 and probe.path.absorb (true)"
    assert explain("nope.x > 1", ns) == "nope.x (?) > 1"


def test_sides_gives_each_operand(ns: dict[str, Any]) -> None:
    assert sides("dp_ep.output_tok_s_per_gpu > 1.5 * tp.output_tok_s_per_gpu", ns) == [
        1234.5,
        1500.0,
    ]
    assert sides("tp.gpus == 8 and dp_ep.gpus == 8", ns) is None


def test_a_deployment_named_scenario_wins() -> None:
    ns = build_namespace({"slo_tpot_s": 1.0, "deployments": [{"name": "scenario", "gpus": 8}]})
    assert evaluate("scenario.gpus", ns) == 8
    with pytest.raises(ExpectError, match="no 'slo_tpot_s' under 'scenario'"):
        evaluate("scenario.slo_tpot_s", ns)


def test_names_are_normalised_to_identifiers() -> None:
    assert ident("dp-ep") == "dp_ep"
    assert ident("moe.dispatch") == "moe_dispatch"
    assert ident("8k") == "n8k"


@pytest.mark.parametrize(
    ("results", "extra", "fragment"),
    [
        ({"deployments": [{"name": "a"}, {"name": "a"}]}, None, "distinct name"),
        ({"deployments": [{"name": "a-b"}, {"name": "a_b"}]}, None, "distinct name"),
        ({"deployments": [{"name": "max"}]}, None, "function name"),
        ({"deployments": [{"name": "tp"}]}, {"tp": 1}, "already deployment"),
        ({"deployments": [{"name": "tp"}]}, {"sqrt": 1}, "already a function"),
        ({"deployments": [{"name": "tp"}]}, {"scenario": 1}, "already the scenario's"),
        ({"runs": []}, None, "no 'deployments' list"),
    ],
)
def test_namespace_clashes_are_errors(
    results: dict[str, Any], extra: dict[str, Any] | None, fragment: str
) -> None:
    with pytest.raises(ExpectError) as err:
        build_namespace(results, extra)
    assert fragment in str(err.value)
