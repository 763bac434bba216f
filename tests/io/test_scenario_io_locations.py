"""Errors find their line from the location they carry (`FieldError.loc`), not their text."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from sim.io.scenario_io import ScenarioError, parse_scenario
from sim.specs.base import FieldError, field_error
from sim.specs.workload import ClosedWorkload

TEXT = """\
name: s
model: deepseek-v3
gpu: h200
deployments:
  - {name: tp8, attn_tp: 8, moe_tp: 8}
  - name: dp8
    attn_tp: 1
    moe_ep: 8
    replicas: 1
workload:
  kind: closed
  concurrency: 4
  input: {kind: fixed, tokens: 100}
  output: {kind: fixed, tokens: 10}
slo: {ttft_s: 1, tpot_s: 0.1}
run: {duration_s: 5}
"""


def _error(text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(text, Path("s.yaml"))
    return err.value


def _line(text: str, starts: str) -> int:
    return next(i for i, t in enumerate(text.splitlines(), 1) if t.strip().startswith(starts))


def test_a_validator_error_carries_its_field_through_pydantic() -> None:
    with pytest.raises(ValidationError) as err:
        ClosedWorkload.model_validate(
            {"kind": "closed", "concurrency": 1, "concurrency_per_rank": 1,
             "input": {"kind": "fixed", "tokens": 1}, "output": {"kind": "fixed", "tokens": 1}}
        )  # fmt: skip
    found = field_error(err.value.errors()[0])
    assert isinstance(found, FieldError) and found.loc == ("concurrency",)


def test_a_message_that_names_no_field_still_finds_its_line() -> None:
    """'give exactly one of ...' starts with no field name: the line comes from its loc."""
    text = TEXT.replace("  concurrency: 4\n", "  concurrency: 4\n  concurrency_per_rank: 2\n")
    problem = _error(text).problems[0]
    assert (problem.line, problem.field) == (_line(text, "concurrency:"), "workload.concurrency")
    assert problem.message == "give exactly one of concurrency or concurrency_per_rank"


def test_a_size_limit_names_the_line_of_its_field() -> None:
    text = TEXT.replace("replicas: 1", "replicas: 100000")
    problem = _error(text).problems[0]
    assert problem.line == _line(text, "replicas:")
    assert problem.field == "deployments[1].replicas" and "over the limit of" in problem.message


def test_a_deployment_the_model_cannot_run_names_its_line() -> None:
    text = TEXT.replace("    moe_ep: 8\n", "    moe_ep: 8\n    dsa: 'on'\n")
    problem = _error(text).problems[0]
    assert (problem.line, problem.field) == (_line(text, "dsa:"), "deployments[1].dsa")
    assert problem.message.startswith("deployments[1] (dp8).dsa='on' but deepseek-v3 has no DSA")
