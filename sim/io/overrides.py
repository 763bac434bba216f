"""`path=value` overrides of a Scenario, as `--set` gives them on the command line.

A path walks the scenario's fields with dots: `workload.rate_req_s`, `run.duration_s`,
`slo.ttft_s`. Under `deployments` the next part picks deployments by name (`deployments.dp_ep`),
by position (`deployments.0`) or all of them (`deployments.*`); a PD deployment continues with
`prefill` or `decode`. Values are YAML (`yaml.safe_load`: numbers, booleans, strings, null, lists,
mappings). The changed scenario is validated again, so a bad value fails with pydantic's message
for that field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import yaml
from pydantic import ValidationError

from sim.io.resolve import resolve
from sim.specs.base import FieldError
from sim.specs.scenario import Scenario

ALL = "*"
_EXPONENT = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$")


class OverrideError(ValueError):
    """An override that cannot apply: bad syntax, an unknown path, or a value the field refuses."""


def parse_value(raw: str) -> Any:
    """A YAML value; `1e3` is a number too (YAML 1.1 would read it as a string)."""
    text = raw.strip()
    if _EXPONENT.match(text):
        return float(text)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise OverrideError(f"value {raw!r} is not valid YAML: {exc}") from None


def split_assignment(text: str) -> tuple[str, str]:
    """`'a.b=V'` -> `('a.b', 'V')` with the value still unparsed."""
    path, sep, raw = text.partition("=")
    path = path.strip()
    if not sep or not path:
        raise OverrideError(
            f"{text!r} is not PATH=VALUE; write e.g. workload.rate_req_s=40 "
            "or deployments.*.kv_dtype=fp8"
        )
    return path, raw


def parse_assignment(text: str) -> tuple[str, Any]:
    """`'a.b=V'` -> `('a.b', parsed V)`."""
    path, raw = split_assignment(text)
    return path, parse_value(raw)


def _known(node: dict[str, Any]) -> str:
    return ", ".join(sorted(node))


def _children(node: Any, part: str, where: str) -> list[tuple[Any, str]]:
    """(child, its dotted label) for each child of `node` (labelled `where`) that path part
    `part` selects."""
    here = where or "the scenario"
    if isinstance(node, dict):
        if part not in node:
            raise OverrideError(f"unknown key {part!r} under {here}: known keys are {_known(node)}")
        return [(node[part], f"{where}.{part}" if where else part)]
    if isinstance(node, list):
        names = [x.get("name") if isinstance(x, dict) else None for x in node]
        label = [f"{where}.{n if n else i}" for i, n in enumerate(names)]
        if part == ALL:
            return list(zip(node, label, strict=True))
        i = int(part) if part.isdigit() else names.index(part) if part in names else None
        if i is not None and i < len(node):
            return [(node[i], label[i])]
        known = ", ".join(str(n) for n in names) if all(names) else "none by name"
        raise OverrideError(
            f"no entry {part!r} under {here}: known names are {known} "
            f"(or an index 0..{len(node) - 1}, or {ALL!r} for all)"
        )
    raise OverrideError(f"{here} is a value ({node!r}), not a section: shorten the path")


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    """Set `path` in a dumped scenario dict in place; OverrideError for an unknown path."""
    parts = path.split(".")
    if any(not p for p in parts):
        raise OverrideError(f"path {path!r} has an empty part; write e.g. workload.rate_req_s")
    nodes: list[tuple[Any, str]] = [(data, "")]
    for part in parts[:-1]:
        nodes = [c for n, where in nodes for c in _children(n, part, where)]
    for node, where in nodes:
        _children(node, parts[-1], where)  # raises on an unknown key or entry, or a value
        if isinstance(node, list):
            raise OverrideError(
                f"{path} names a whole entry, not a field: set one of its fields, "
                f"e.g. {path}.kv_dtype=fp8"
            )
        node[parts[-1]] = value


def _loc_label(data: Any, loc: tuple[Any, ...]) -> str:
    """Dotted field path of a pydantic error, without union tags ('unit', 'poisson')."""
    parts, node = [], data
    for p in loc:
        if isinstance(node, dict) and p in node:
            node = node[p]
        elif isinstance(node, list) and isinstance(p, int) and p < len(node):
            node = node[p]
            name = node.get("name") if isinstance(node, dict) else None
            parts.append(str(name) if name else str(p))
            continue
        elif p != loc[-1]:
            continue
        parts.append(str(p))
    return ".".join(parts) or "(scenario)"


def validation_message(exc: ValidationError, data: Any) -> str:
    """One line per field error: `path: message`."""
    lines = []
    for err in exc.errors():
        msg = str(err["msg"]).removeprefix("Value error, ")
        loc = tuple(err["loc"])
        # a scenario-wide check names its field in the message ('profile: unknown profile ...')
        lines.append(f"{_loc_label(data, loc)}: {msg}" if loc else msg)
    return "; ".join(lines)


def apply_overrides(scenario: Scenario, overrides: Iterable[tuple[str, Any]]) -> Scenario:
    """A new validated Scenario with each (path, value) applied in order.

    Raises OverrideError naming the path (unknown key: the keys that exist there) or, for a
    value the field refuses, pydantic's message for that field.
    """
    pairs = list(overrides)
    if not pairs:
        return scenario
    data = scenario.model_dump(mode="json")
    for path, value in pairs:
        set_path(data, path, value)
    given = ", ".join(f"{p}={v!r}" for p, v in pairs)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise OverrideError(f"{validation_message(exc, data)} (after setting {given})") from None
    try:  # the names it reads and the deployments against the model, as a file's are on load
        return resolve(scenario, read_trace=False).scenario
    except FieldError as exc:
        raise OverrideError(f"{exc} (after setting {given})") from None
