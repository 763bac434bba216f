"""Scenario YAML -> `ResolvedScenario` (or its `Scenario`), with errors that name the file, the
line and the field.

A file is validated (its shape), resolved (`sim.io.resolve`: model, GPU and profile names, the
deployments against the model) and its `expect:` claims vetted, so a bad name or claim fails
when the file loads, with its line. Relative paths in the file (a trace CSV, a model
config.json, a GPU YAML, a profile) are taken relative to the scenario file's folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sim.checks.claim_names import check_claim_names
from sim.checks.expect import ClaimError, validate_claims
from sim.io.resolve import ResolvedScenario, resolve
from sim.io.yaml_where import YamlTreeError, check_yaml_tree, yaml_line
from sim.specs.base import FieldError, field_error
from sim.specs.limits import LimitError, check_data, check_flow_depth
from sim.specs.limits import check_text_size as check_size
from sim.specs.scenario import Scenario


@dataclass(frozen=True)
class FieldProblem:
    line: int | None
    field: str
    message: str


class ScenarioError(ValueError):
    """A scenario file that does not load; `problems` lists each bad field with its line."""

    def __init__(self, path: Path, problems: list[FieldProblem]) -> None:
        self.path, self.problems = path, problems
        lines = [
            f"{path}:{p.line}: {p.field}: {p.message}"
            if p.line
            else f"{path}: {p.field}: {p.message}"
            for p in problems
        ]
        super().__init__("\n".join(lines))


def _node_at(root: Any, loc: tuple[Any, ...]) -> tuple[Any, list[str | int]]:
    """Deepest YAML node along a pydantic `loc`; loc parts absent from the file (union tags such
    as 'unit' or 'poisson') are skipped. Returns the node and the path actually followed."""
    node, followed = root, []
    for part in loc:
        nxt = None
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if k.value == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            nxt = node.value[part] if part < len(node.value) else None
        if nxt is not None:
            node = nxt
            followed.append(part)
    return node, followed


def _field_name(loc: tuple[Any, ...], followed: list[str | int]) -> str:
    """Dotted field path without union tags ('unit', 'poisson': loc parts absent from the
    file that are not the last part)."""
    parts, f = [], list(followed)
    for k, p in enumerate(loc):
        if f and p == f[0]:
            f.pop(0)
        elif k < len(loc) - 1:
            continue
        parts.append(f"[{p}]" if isinstance(p, int) else f".{p}")
    return "".join(parts).lstrip(".") or "(scenario)"


def _problems(exc: ValidationError, root: Any) -> list[FieldProblem]:
    out = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        found = field_error(err)  # a validator's own error, which knows its field
        if found is not None:
            loc, msg = loc + found.loc, found.message
        node, followed = _node_at(root, loc)
        field = _field_name(loc, followed)
        if err["type"] == "literal_error":
            msg = f"{msg}, not {err['input']!r}"
        if err["type"] == "extra_forbidden":
            msg = f"unknown field; {msg.lower()} (check the spelling against `mlasim schema`)"
        line = int(node.start_mark.line) + 1 if node is not None else None
        if err["type"] == "missing" and followed != list(loc):
            msg = f"{msg} (add it to the block at this line)"
        out.append(FieldProblem(line=line, field=field, message=msg))
    return out


def _relative(base: Path, value: Any, suffixes: tuple[str, ...]) -> Any:
    if not isinstance(value, str) or not value.endswith(suffixes):
        return value
    p = Path(value)
    if p.is_absolute():
        return value
    candidate = base / p
    try:
        found = candidate.exists()
    except (OSError, ValueError):  # a name too long for the file system: the catalog says so
        return value
    return str(candidate) if found or value.endswith(".csv") else value


def resolve_paths(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """A copy of the parsed scenario with file references made relative to `base`."""
    out = dict(data)
    out["model"] = _relative(base, out.get("model"), (".json",))
    out["gpu"] = _relative(base, out.get("gpu"), (".yaml", ".yml"))
    out["profile"] = _relative(base, out.get("profile"), (".json",))
    wl = out.get("workload")
    if isinstance(wl, dict) and wl.get("kind") == "trace":
        out["workload"] = {**wl, "path": _relative(base, wl.get("path"), (".csv",))}
    return {k: v for k, v in out.items() if v is not None or k in data}


def _syntax(p: Path, text: str) -> Any:
    """The parsed YAML, after its node tree passed `check_yaml_tree` (duplicate keys, depth,
    alias expansion); ScenarioError naming the line otherwise."""
    try:
        check_size(len(text.encode(errors="replace")), "(file)")
        check_flow_depth(text)  # before the parser: its scanner is quadratic in open brackets
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        check_yaml_tree(root)
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise ScenarioError(p, [FieldProblem(line, "(yaml)", str(exc.problem))]) from None
    except yaml.YAMLError as exc:  # a reader error (a control character, a binary file)
        raise ScenarioError(p, [FieldProblem(None, "(yaml)", _first_line(exc))]) from None
    except YamlTreeError as exc:
        raise ScenarioError(p, [FieldProblem(exc.line, exc.field, exc.message)]) from None
    except LimitError as exc:
        raise ScenarioError(p, [FieldProblem(None, exc.field, exc.message)]) from None
    except RecursionError:  # nesting beyond what the parser recurses through
        message = "nested too deeply to parse; scenario blocks are a few levels deep"
        raise ScenarioError(p, [FieldProblem(None, "(yaml)", message)]) from None


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__


def _field_problem(root: Any, loc: tuple[Any, ...], message: str) -> FieldProblem:
    node, followed = _node_at(root, loc)
    line = int(node.start_mark.line) + 1 if node is not None else None
    return FieldProblem(line=line, field=_field_name(loc, followed), message=message)


def parse_scenario(text: str, path: Path | str = "<scenario>") -> Scenario:
    """Validate and resolve scenario YAML text (its trace is not read); raises ScenarioError
    naming line and field."""
    return parse_resolved(text, path, read_trace=False).scenario


def parse_resolved(
    text: str, path: Path | str = "<scenario>", *, read_trace: bool = False
) -> ResolvedScenario:
    """Scenario YAML text, validated and resolved; ScenarioError naming line and field. The
    trace of a trace workload is read when the run starts (`ResolvedScenario.with_trace`),
    unless `read_trace`."""
    p = Path(path)
    data = _syntax(p, text)
    if not isinstance(data, dict):
        raise ScenarioError(p, [FieldProblem(1, "(scenario)", "a scenario is a YAML mapping")])
    try:
        check_data(data)
    except LimitError as exc:
        line = yaml_line(text, exc.loc)
        raise ScenarioError(p, [FieldProblem(line, exc.field, exc.message)]) from None
    data = resolve_paths(data, p.parent)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        raise ScenarioError(p, _problems(exc, root)) from None
    try:
        resolved = resolve(scenario, read_trace=False)
    except FieldError as exc:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        raise ScenarioError(p, [_field_problem(root, exc.loc, exc.message)]) from None
    try:  # claims are vetted when the file loads, so `mlasim run` rejects a malformed one too
        validate_claims(scenario.expect)
        check_claim_names(resolved.scenario)  # and the names they read: a typo fails first
    except ClaimError as exc:
        problems = [
            FieldProblem(yaml_line(text, ["expect", i]), f"expect[{i}]", msg)
            for i, msg in exc.problems
        ]
        raise ScenarioError(p, problems) from None
    return resolved.with_trace() if read_trace else resolved


def load_scenario(path: str | Path) -> Scenario:
    """Read, validate and resolve a scenario file (its trace is not read)."""
    return load_resolved(path).scenario


def load_resolved(path: str | Path) -> ResolvedScenario:
    """Read, validate and resolve a scenario file; its trace is read when the run starts."""
    p = Path(path)
    if p.is_dir():
        found = sorted(q.name for q in p.glob("*.yaml"))
        hint = f", e.g. {p / found[0]}" if found else " (it holds no .yaml file)"
        message = f"is a folder, not a scenario file; give one YAML file in it{hint}"
        raise ScenarioError(p, [FieldProblem(None, "(file)", message)])
    if not p.is_file():
        raise ScenarioError(p, [FieldProblem(None, "(file)", "no such scenario file")])
    try:
        check_size(p.stat().st_size, "(file)")
        text = p.read_text()
    except LimitError as exc:
        raise ScenarioError(p, [FieldProblem(None, "(file)", exc.message)]) from None
    except UnicodeDecodeError:
        message = "not a UTF-8 text file (a scenario is YAML text)"
        raise ScenarioError(p, [FieldProblem(None, "(file)", message)]) from None
    except OSError as exc:
        raise ScenarioError(p, [FieldProblem(None, "(file)", f"cannot read it ({exc})")]) from None
    return parse_resolved(text, p)
