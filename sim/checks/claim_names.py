"""Names in `expect:` lines checked against what a run will report, before it runs.

A claim names results by dotted paths (`tp8.ttft_s.p90`, `pd.pools.decode.dp_imbalance`,
`scenario.slo_ttft_s`, `even.duration_s` for a probe). Whether such a path exists follows from the
scenario alone: its deployment names, its probe names and the fields of `DeploymentResults` and
`Results`. `check_claim_names` walks every path through that shape when the scenario loads, so a
misspelt field fails in a second with the names that do exist, not after the simulation. Keys
only a run knows (ops under `step_breakdown_s`, a probe's values) are taken on trust; the run's
own namespace (`sim.checks.namespace.resolve`) still checks them.
"""

from __future__ import annotations

import ast
import difflib
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel

from sim.checks.expect import ClaimError, parse
from sim.checks.namespace import FUNCTIONS, SCENARIO, ident
from sim.metrics.results import DeploymentResults, PoolResults, Results
from sim.specs.deployment import PdDeployment
from sim.specs.scenario import Scenario

ANY = "any"  # a level whose keys only the run knows
Shape = Mapping[str, Any] | str  # a group of named shapes, ANY, or a leaf (VALUE or TEXT)
VALUE = "value"  # a number (or a flag), what a claim can compare
TEXT = "text"  # a name, a list: reported, never compared


def _shape_of(annotation: Any) -> Shape:
    """The shape of a field's type: a model's fields, ANY for a dict, VALUE for a leaf."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _shape_of(args[0])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return model_shape(annotation)
    if origin is dict:
        return ANY
    if annotation is str or origin in (list, typing.Literal):
        return TEXT
    return VALUE


def model_shape(model: type[BaseModel]) -> dict[str, Shape]:
    return {name: _shape_of(f.annotation) for name, f in model.model_fields.items()}


def scenario_shape(scenario: Scenario) -> dict[str, Shape]:
    """What a run of `scenario` will let its claims name: each deployment's results (its pools
    by name), the run-level values under `scenario`, and each probe (keys on trust)."""
    pool = model_shape(PoolResults)
    shape: dict[str, Shape] = {}
    for d in scenario.deployments:
        dep = dict(model_shape(DeploymentResults))
        names = ("prefill", "decode") if isinstance(d, PdDeployment) else (d.name,)
        dep["pools"] = {ident(n): pool for n in names}
        shape[ident(d.name)] = dep
    if SCENARIO not in shape:
        top = model_shape(Results)
        shape[SCENARIO] = {k: v for k, v in top.items() if k != "deployments"}
    for name in scenario.probes or {}:
        shape[ident(name)] = ANY
    return shape


def _names(node: ast.AST) -> Iterator[str]:
    """Dotted names an expression reads (not the functions it calls)."""
    if isinstance(node, ast.Name | ast.Attribute):
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            yield ".".join([node.id, *reversed(parts)])
        return
    if isinstance(node, ast.Call):
        for arg in node.args:
            yield from _names(arg)
        return
    for child in ast.iter_child_nodes(node):
        yield from _names(child)


def unknown(path: str, shape: Mapping[str, Shape]) -> str | None:
    """Why `path` will not resolve to a value, or None when it may."""
    node: Shape = shape
    parts = path.split(".")
    for i, part in enumerate(parts):
        if node == ANY:
            return None
        here = ".".join(parts[:i])
        if not isinstance(node, Mapping):
            return f"{path!r}: {here!r} is a value, it has no {part!r}"
        if part not in node:
            level = f"under {here!r}" if here else "at the top level"
            close = difflib.get_close_matches(part, list(node), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            return f"unknown name {path!r}: no {part!r} {level}{hint}; available: " + ", ".join(
                sorted(node)
            )
        node = node[part]
    if isinstance(node, Mapping):
        return f"{path!r} is a group of values, not a number; keys under it: " + ", ".join(
            sorted(node)
        )
    if node == TEXT:
        return f"{path!r} is text or a list, not a number"
    return None


def check_claim_names(scenario: Scenario) -> None:
    """Raise ClaimError listing each `expect:` line that names something no run of this
    scenario reports; lines that do not parse are `validate_claims`'s to report."""
    shape = scenario_shape(scenario)
    problems = []
    for i, claim in enumerate(scenario.expect):
        for path in _names(parse(claim).body):
            if path.split(".")[0] in FUNCTIONS:
                continue
            why = unknown(path, shape)
            if why is not None:
                problems.append((i, why))
                break
    if problems:
        raise ClaimError(problems)
