"""Fuzz cases: mutations of the project's own scenarios, profiles and model configs, expressions
and trace CSVs.

Each `mutate_*` takes a `random.Random`, so hypothesis drives them in `test_fuzz.py`
(`st.randoms()`) and `run_fuzz.py` draws many from a fixed seed.
"""

from __future__ import annotations

import contextlib
import copy
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
PROFILE = ROOT / "sim" / "catalog" / "profiles" / "h800-published.json"
CONFIGS = sorted((ROOT / "sim" / "catalog" / "models").glob("*.json"))
ODD: list[Any] = [
    0, -1, 1, 2, 7, 10**30, -(10**30), 2**63, 1e300, -1e300, 1e-300, float("nan"), float("inf"),
    float("-inf"), "", "x", "a" * 5000, "deepseek-v3", "h200", None, True, False, [], {}, [1, 2],
    {"kind": "fixed"}, {"a": {"b": 1}}, "../../etc/passwd", "x" * 300 + ".json",
]  # fmt: skip


def _paths(data: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(data, dict):
        for k, v in data.items():
            out += _paths(v, (*at, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += _paths(v, (*at, i))
    return out


def _set(data: Any, path: tuple[Any, ...], value: Any, delete: bool = False) -> Any:
    if not path:
        return value
    parent = data
    for p in path[:-1]:
        parent = parent[p]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return data


def _value(rng: random.Random, old: Any) -> Any:
    if isinstance(old, int | float) and not isinstance(old, bool) and rng.random() < 0.4:
        return rng.choice([old * 10 ** rng.randint(1, 12), -old, old / 1e6, old + 1, int(old)])
    return copy.deepcopy(rng.choice(ODD))  # a fresh copy: later rounds may mutate inside it


def mutate_data(data: Any, rng: random.Random, rounds: int) -> Any:
    for _ in range(rounds):
        paths = _paths(data)[1:] or [()]
        path = rng.choice(paths)
        with contextlib.suppress(KeyError, IndexError, TypeError):
            data = _set(data, path, _value(rng, None), delete=rng.random() < 0.2)
    return data


def mutate_scenario(rng: random.Random) -> str:
    src = rng.choice(SCENARIOS)
    text = src.read_text()
    how = rng.random()
    if how < 0.05:
        return text + f"\n{rng.choice(['name', 'model', 'run'])}: dup\n"
    if how < 0.08:
        depth = rng.choice([30, 500, 5000])
        return text + "\nprobes: " + "[" * depth + "]" * depth + "\n"
    if how < 0.10:
        return text[: rng.randint(0, len(text))]  # cut short: malformed YAML
    data = yaml.safe_load(text)
    data = mutate_data(data, rng, rng.randint(1, 3))
    try:
        out = yaml.safe_dump(data, sort_keys=False)
    except yaml.YAMLError:
        return text
    return out.replace("{base}", str(src.parent))


def mutate_profile(rng: random.Random) -> str:
    data = json.loads(PROFILE.read_text())
    if rng.random() < 0.05:
        return "[" * 50_000 + "]" * 50_000
    return json.dumps(mutate_data(data, rng, rng.randint(1, 3)))


def mutate_config(rng: random.Random) -> str:
    """A catalog model's HuggingFace config.json with 1-3 fields deleted or changed."""
    data = json.loads(rng.choice(CONFIGS).read_text())
    return json.dumps(mutate_data(data, rng, rng.randint(1, 3)))


TOKENS = ["dp8_ep8", "tp8", ".", "output_tok_s_per_gpu", "ttft_s", "p90", " > ", " < ", " == ",
          "1", "0", "1e309", "(", ")", " * ", " / ", " and ", " or ", "not ", "abs(", "__class__",
          "[", "]", "'", "lambda", "import", "9" * 400, " ** ", "-", "min(", ","]  # fmt: skip


def mutate_expression(rng: random.Random) -> str:
    return "".join(rng.choice(TOKENS) for _ in range(rng.randint(1, 12)))


def mutate_trace(rng: random.Random) -> str:
    if rng.random() < 0.05:
        return bytes(rng.randrange(256) for _ in range(200)).decode("utf-8", "surrogateescape")
    header = "arrival_s,input_tokens,output_tokens" + (
        ",cached_tokens" if rng.random() < 0.3 else ""
    )
    cells = ["0", "1", "0.5", "100", "-1", "nan", "inf", "1e30", "x", "", "2.5", "9" * 40]
    rows = [header]
    for _ in range(rng.randint(0, 20)):
        n = header.count(",") + 1
        rows.append(",".join(rng.choice(cells) if rng.random() < 0.2 else str(rng.randint(1, 500))
                             for _ in range(n)))  # fmt: skip
    return "\n".join(rows) + "\n"


MUTATORS = {"scenario": mutate_scenario, "profile": mutate_profile, "config": mutate_config,
            "expression": mutate_expression, "trace": mutate_trace}  # fmt: skip


def draw_cases(counts: dict[str, int], seed: int) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    for kind, n in counts.items():
        for _ in range(n):
            yield {"kind": kind, "text": MUTATORS[kind](rng)}
