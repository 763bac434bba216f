"""YAML with positions: syntax errors and spec errors that name the file and the line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml


def load_yaml(path: Path, text: str) -> Any:
    """`yaml.safe_load` whose syntax errors name the file and line."""
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ValueError(f"{path}{line}: YAML syntax: {exc.problem or exc.context}") from None


def where(path: Path, text: str, keys: Sequence[str | int]) -> str:
    line = yaml_line(text, keys)
    return f"{path}:{line}" if line else str(path)


def yaml_line(text: str, keys: Sequence[str | int]) -> int | None:
    """1-based line of the node at `keys` (mapping keys / list indices) in YAML `text`."""
    try:
        node: Any = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
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
