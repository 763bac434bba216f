"""YAML with positions: syntax errors and spec errors that name the file and the line; the
node-tree checks every scenario file passes before it is constructed (duplicate keys, nesting
depth, alias expansion)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from sim.specs.limits import current_limits

MAX_EXPANDED_NODES = 1_000_000  # nodes a file may expand to through aliases (`*a`)


class YamlTreeError(ValueError):
    """A YAML node tree that is well formed but not acceptable input; names line and field."""

    def __init__(self, line: int | None, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.line, self.field, self.message = line, field, message


def _key(node: Any) -> str:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else f"<{node.tag}>"


def check_yaml_tree(root: Any) -> None:
    """YamlTreeError for a duplicate mapping key (naming both lines), nesting deeper than the
    limits allow, or aliases that expand to more than `MAX_EXPANDED_NODES` nodes (a 'billion
    laughs' file). Iterative: no recursion limit, however deep the file."""
    if root is None:
        return
    depth_limit = current_limits().max_depth
    stack: list[tuple[Any, str, int]] = [(root, "", 0)]
    seen = 0
    while stack:
        node, path, depth = stack.pop()
        seen += 1
        line = int(node.start_mark.line) + 1
        if seen > MAX_EXPANDED_NODES:
            raise YamlTreeError(
                line, path or "(yaml)",
                f"expands to more than {MAX_EXPANDED_NODES:,} values through aliases; "
                "write the values out or drop the aliases",
            )  # fmt: skip
        if depth > depth_limit:
            raise YamlTreeError(
                line, path or "(yaml)",
                f"nested {depth} levels deep, over the limit of {depth_limit}; flatten it",
            )  # fmt: skip
        if isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for k, v in node.value:
                name, at = _key(k), int(k.start_mark.line) + 1
                field = f"{path}.{name}" if path else name
                if name in first and name != "<<":
                    raise YamlTreeError(
                        at, field,
                        f"duplicate key: given on line {first[name]} and again on line {at} "
                        "(YAML would keep only the last); remove one",
                    )  # fmt: skip
                first[name] = at
                stack.append((v, field, depth + 1))
        elif isinstance(node, yaml.SequenceNode):
            stack += [(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(node.value)]


_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def keys(field: str) -> list[str | int]:
    """'deployments[0].nodes' -> ['deployments', 0, 'nodes'] (for `yaml_line`)."""
    return [int(i) if i else k for k, i in _PART.findall(field)]


def load_yaml(path: Path, text: str) -> Any:
    """`yaml.safe_load` whose syntax errors name the file and line."""
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ValueError(f"{path}{line}: YAML syntax: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not YAML text ({str(exc).splitlines()[0][:200]})") from None
    except RecursionError:
        raise ValueError(f"{path}: YAML nested too deeply to parse") from None


def where(path: Path, text: str, keys: Sequence[str | int]) -> str:
    line = yaml_line(text, keys)
    return f"{path}:{line}" if line else str(path)


def yaml_line(text: str, keys: Sequence[str | int]) -> int | None:
    """1-based line of the node at `keys` (mapping keys / list indices) in YAML `text`."""
    try:
        node: Any = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return None
    for key in keys:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == str(key)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int):
            node = node.value[key] if key < len(node.value) else None
        else:
            return None
        if node is None:
            return None
    return int(node.start_mark.line) + 1
