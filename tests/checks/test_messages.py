"""What a user reads when a claim or a probe is wrong: the message, where, and the fix."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import typer
import yaml
from rich.console import Console
from typer.testing import CliRunner

from sim.checks.expect import ClaimError, ExpectError, parse, validate_claims
from sim.checks.probes import ProbeError, compute_probes
from sim.checks.runner import CheckReport, CheckRow, ScenarioReport
from sim.cli.check import register, render

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _message(expr: object) -> str:
    with pytest.raises(ExpectError) as err:
        parse(expr)  # type: ignore[arg-type]
    return str(err.value)


@pytest.mark.parametrize(
    ("expr", "fragments"),
    [
        (
            "tp8.kv_dup_factor = 8",
            [
                "syntax error at column 19",
                "'=' at column 19",
                "write '=='",
                "'tp8.kv_dup_factor == 8'",
            ],
        ),
        ("a == 1 and b = 2", ["'=' at column 14", "'a == 1 and b == 2'"]),
        ("a =< 1", ["'=<' at column 3", "write '<='", "'a <= 1'"]),
        ("a => 1", ["'=>' at column 3", "write '>='", "'a >= 1'"]),
        ("abs(tp.gpus = 8) > 0", ["'=' at column 13", "'abs(tp.gpus == 8) > 0'"]),
    ],
)
def test_single_equals_gets_the_fix_and_its_column(expr: str, fragments: list[str]) -> None:
    msg = _message(expr)
    for fragment in fragments:
        assert fragment in msg, msg
    # Python's own hint offers ':=', which the evaluator rejects: only ours is shown
    assert ":=" not in msg and "perhaps" not in msg.lower()


def test_equals_hint_gives_no_example_that_would_not_parse() -> None:
    msg = _message("a = = 1")
    assert "'=' at column 3" in msg and "write '=='" in msg
    assert "'a == == 1'" not in msg


@pytest.mark.parametrize(
    ("expr", "fragments"),
    [("a +", ["syntax error at the end"]), ("(a", ["column 1", "'(' was never closed"])],
)
def test_other_syntax_errors_have_no_equals_hint(expr: str, fragments: list[str]) -> None:
    msg = _message(expr)
    for fragment in fragments:
        assert fragment in msg
    assert "write '=='" not in msg


@pytest.mark.parametrize("expr", ["a <= 1 and", "a != (1", "a >= 1 b", "a == 1 1", "(a := 1"])
def test_equals_signs_of_real_operators_get_no_hint(expr: str) -> None:
    msg = _message(expr)
    assert msg.startswith("syntax error") and "is not a comparison" not in msg


def test_keyword_argument_is_read_as_a_misspelt_comparison() -> None:
    msg = _message("abs(x = 8) > 1")  # parses: x=8 is a keyword argument
    assert "abs() takes no keyword arguments ('x=' at column 5)" in msg
    assert "write '=='" in msg
    assert "unpacking" in _message("max(**a) > 1")


def test_unknown_function_lists_the_functions_once() -> None:
    msg = _message("mean(tp.gpus) > 1")
    assert "calling 'mean' is not allowed" in msg and "column 1" in msg
    assert msg.count("rel_err") == 1


def test_yaml_mapping_claim_says_why() -> None:
    claim = yaml.safe_load("- tp.gpus: 8")[0]  # the ': ' made YAML read a mapping
    msg = _message(claim)
    assert "mapping" in msg and "tp.gpus == 8" in msg


def test_validate_claims_lists_every_bad_line() -> None:
    claims = ["tp.gpus == 8", "tp.gpus = 8", "bogus(tp.gpus) > 1", "x.y[0] > 1"]
    with pytest.raises(ClaimError) as err:
        validate_claims(claims)
    assert [i for i, _ in err.value.problems] == [1, 2, 3]
    lines = str(err.value).splitlines()
    assert (
        lines[0].startswith("expect[1]: syntax error at column 9") and "'tp.gpus == 8'" in lines[0]
    )
    assert lines[1].startswith("expect[2]: calling 'bogus'")
    assert lines[2].startswith("expect[3]: indexing")
    assert isinstance(err.value, ExpectError)  # callers catching ExpectError see it too
    again = pickle.loads(pickle.dumps(err.value))  # crosses process pools intact
    assert again.problems == err.value.problems and str(again) == str(err.value)


def test_validate_claims_needs_no_results() -> None:
    # names resolve only against results; a parse-level check accepts any dotted name
    assert validate_claims(["nope.p95 > 1", "rel_err(a.b, 0.03) < 0.1"]) is None
    assert validate_claims([]) is None


def test_every_library_claim_validates() -> None:
    files = sorted(SCENARIOS.glob("*.yaml"))
    assert files
    for path in files:
        validate_claims(yaml.safe_load(path.read_text()).get("expect") or [])


def _report(*rows: CheckRow) -> str:
    rep = ScenarioReport(path=Path("s.yaml"), name="default", rows=rows, wall_s=0.0)
    console = Console(record=True, width=400)
    render(CheckReport(scenarios=(rep,)), console)
    return console.export_text()


def test_error_line_shows_the_message_not_the_class() -> None:
    detail = "s.yaml:30: expect[0]: syntax error at column 19: invalid syntax"
    out = _report(CheckRow(kind="error", label="ExpectError", ok=False, detail=detail))
    assert f"ERROR default: {detail}" in out
    assert "ExpectError" not in out


def test_error_lines_for_surprises_and_multi_line_messages() -> None:
    out = _report(
        CheckRow(kind="error", label="KeyError", ok=False, detail="'p95'"),
        CheckRow(kind="error", label="ScenarioError", ok=False, detail="s.yaml:3: a\ns.yaml:4: b"),
        CheckRow(kind="error", label="RuntimeError", ok=False, detail=""),
    )
    lines = out.splitlines()
    assert "ERROR default: KeyError: 'p95'" in lines  # a bare key needs its class to make sense
    at = lines.index("ERROR default: s.yaml:3: a")
    assert lines[at + 1] == "s.yaml:4: b"
    assert "ERROR default: RuntimeError" in lines  # no message: the class is all there is


def test_check_command_prints_the_claim_error(tmp_path: Path) -> None:
    text = (SCENARIOS / "default.yaml").read_text()
    good = "  - tp8.kv_dup_factor == 8"
    assert good in text
    path = tmp_path / "default.yaml"
    path.write_text(text.replace(good, "  - tp8.kv_dup_factor = 8"))
    line = text.splitlines().index(good) + 1
    app = typer.Typer()
    register(app)

    @app.command()
    def _other() -> None:  # a second command keeps `check` a named subcommand
        """Unused."""

    result = CliRunner().invoke(app, ["check", str(path), "--jobs", "1"])
    assert result.exit_code == 1
    out = " ".join(result.output.split())
    assert f"ERROR default: {path}:{line}: expect[0]: syntax error at column 19" in out
    assert "write '==': 'tp8.kv_dup_factor == 8'" in out


def test_step_cost_deployment_error_names_the_field() -> None:
    entry = {
        "kind": "step_cost",
        "model": "deepseek-v3",
        "gpu": "h200",
        "deployment": {"attn_tp": 3},
        "requests_per_rank": [16],
        "kv_tokens": [8192],
    }
    with pytest.raises(ProbeError) as err:
        compute_probes({"odd": entry})
    msg = str(err.value)
    assert msg.startswith("probe 'odd' (step_cost): deployment: attn_tp=3 must divide")
    assert "pydantic" not in msg and "\n" not in msg
    entry["deployment"] = {"attn_tp": 1, "attn_tpp": 1}
    with pytest.raises(ProbeError, match=r"deployment\.attn_tpp: Extra inputs are not permitted"):
        compute_probes({"odd": entry})
