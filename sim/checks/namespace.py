"""The names an `expect:` expression can read: results per deployment plus scenario-level values.

Built from the Results JSON dict (`{"scenario": ..., "deployments": [{"name": ..., ...}]}`): each
deployment's name maps to its dict, and nested dicts are reached with dots (`tp.ttft_s.p90`);
lists of named dicts are keyed by name (`pd.pools.prefill.busy_fraction`). The results'
run-level values are under `scenario` (`scenario.slo_ttft_s`), unless a deployment is so named.
Names and keys that are not Python identifiers are normalised: every character outside
[A-Za-z0-9_] becomes `_` (`dp-ep` -> `dp_ep`, `moe.dispatch` -> `moe_dispatch`), and a leading
digit gets an `n` in front (`8k` -> `n8k`). Extra values (probes, cost-model facts) are merged in
at the top level under their own names; a clash with a deployment or a function is an error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

Number = int | float | bool
Namespace = Mapping[str, Any]


class ExpectError(ValueError):
    """An expression is not allowed, names something unknown, or cannot be evaluated."""


def rel_err(a: float, b: float) -> float:
    """Relative error of `a` against the reference `b`: |a - b| / |b|."""
    if b == 0:
        raise ExpectError("rel_err(a, b): the reference b is 0; use abs(a - b) instead")
    return abs(a - b) / abs(b)


def _round(x: float, ndigits: int = 0) -> float:
    return float(round(x, int(ndigits)))


# name -> (function, fewest args, most args); these names are reserved in every namespace
FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int]] = {
    "abs": (abs, 1, 1),
    "min": (min, 2, 16),
    "max": (max, 2, 16),
    "rel_err": (rel_err, 2, 2),
    "round": (_round, 1, 2),
    "log": (math.log, 1, 1),  # natural logarithm
    "sqrt": (math.sqrt, 1, 1),
}

SCENARIO = "scenario"  # namespace entry for the results' top-level (non-deployment) values
_NON_IDENT = re.compile(r"[^A-Za-z0-9_]")


def ident(name: str) -> str:
    """`name` as an expression identifier (see the module docstring for the rule)."""
    out = _NON_IDENT.sub("_", str(name))
    return f"n{out}" if out[:1].isdigit() else out


def _normalise(value: Any, where: str) -> Any:
    """Copy nested dicts with identifier keys; two keys that normalise alike are an error.

    A list of dicts that all have a `name` (a PD deployment's `pools`) becomes a dict by name.
    """
    if isinstance(value, list) and value and all(_named(v) for v in value):
        value = {v["name"]: v for v in value}
    if not isinstance(value, Mapping):
        return value
    out: dict[str, Any] = {}
    for key, sub in value.items():
        k = ident(key)
        if k in out:
            raise _err(f"{where}: two keys both read as {k!r}; rename one")
        out[k] = _normalise(sub, f"{where}.{k}" if where else k)
    return out


def _named(value: Any) -> bool:
    return isinstance(value, Mapping) and isinstance(value.get("name"), str)


def build_namespace(
    results: Mapping[str, Any], extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Namespace for expectations from a Results JSON dict and optional extra named values."""
    ns: dict[str, Any] = {}
    reserved = FUNCTIONS
    deployments = results.get("deployments")
    if not isinstance(deployments, list):
        raise _err("results have no 'deployments' list; is this a Results JSON dict?")
    sources: dict[str, str] = {}
    for dep in deployments:
        raw = str(dep.get("name", ""))
        key = ident(raw)
        if not raw or key in ns or key in reserved:
            why = "is empty" if not raw else f"reads as {key!r}, already taken or a function name"
            raise _err(f"deployment name {raw!r} {why}; give each deployment a distinct name")
        ns[key] = _normalise(dep, key)
        sources[key] = "deployment"
    if SCENARIO not in ns:  # run-level figures (slo_ttft_s, end_s, ...); a deployment name wins
        top = {k: v for k, v in results.items() if k != "deployments"}
        ns[SCENARIO] = _normalise(top, SCENARIO)
        sources[SCENARIO] = "the scenario's run-level values"
    for name, value in (extra or {}).items():
        key = ident(name)
        if key in ns or key in reserved:
            taken = sources.get(key, "a function")
            raise _err(f"value {name!r} reads as {key!r}, which is already {taken}; rename it")
        ns[key] = _normalise(value, key)
        sources[key] = "an extra value"
    return ns


def resolve(path: str, ns: Namespace) -> Number:
    """The number at dotted `path`; errors list the names available where the path broke off."""
    parts = path.split(".")
    node: Any = ns
    for i, part in enumerate(parts):
        here = ".".join(parts[:i])
        if not isinstance(node, Mapping):
            raise _err(f"{path!r}: {here!r} is a {_kind(node)}, it has no key {part!r}")
        if part not in node:
            level = f"under {here!r}" if here else "at the top level"
            raise _err(f"unknown name {path!r}: no {part!r} {level}; available: {_keys(node)}")
        node = node[part]
    if isinstance(node, bool | int | float):
        return node
    if node is None:
        raise _err(f"{path!r} is null (not reported for this run)")
    extra = f"; keys under it: {_keys(node)}" if isinstance(node, Mapping) else ""
    raise _err(f"{path!r} is a {_kind(node)}, not a number{extra}")


def _keys(node: Mapping[str, Any]) -> str:
    keys = sorted(node)
    return ", ".join(keys) if keys else "(none)"


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "group of values"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def format_value(value: Any) -> str:
    """Short, readable rendering of a number for messages and tables."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    return repr(value)


def _err(msg: str) -> ExpectError:
    return ExpectError(msg)
