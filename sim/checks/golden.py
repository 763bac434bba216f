"""Golden summaries: a scenario's key results, stored next to it and compared within tolerances.

A golden file is `<scenario folder>/golden/<scenario file stem>.json`:

    {"scenario": "dp-attention-vs-tp", "values": {"tp.output_tok_s_per_gpu": 1234.5, ...}}

`values` maps `deployment.metric` (the names `expect:` uses) to a number. A run matches when every
stored metric is within its tolerance: |current - golden| <= rel_tol * |golden| + abs_tol. Runs are
deterministic (same scenario, same seed), so any drift means the model changed; the tolerance
decides how much change passes silently. `mlasim check --update-golden` rewrites the files, and
the diff is then reviewed like code.

A scenario may tune this in a `golden:` block (all optional):

    golden:
      rel_tol: 0.05                  # default relative tolerance for every metric
      tolerances: {ttft_s.p99: 0.2}  # per metric: 'metric' (every deployment) or 'dep.metric'
      metrics: [output_tok_s_per_gpu, tpot_s.p90]   # replaces DEFAULT_METRICS
      enabled: true                  # false: no golden file for this scenario
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from sim.checks.namespace import ident
from sim.specs.base import Spec

DEFAULT_METRICS: tuple[str, ...] = (
    "gpus",
    "output_tok_s_per_gpu",
    "input_tok_s_per_gpu",
    "ttft_s.p50",
    "ttft_s.p90",
    "tpot_s.p50",
    "tpot_s.p90",
    "goodput_req_s",
    "step_time_s",
    "requests.completed",
    "kv_dup_factor",
    "kv_capacity_tokens_per_gpu",
    "mtp_accept_len",
)
ABS_TOL = 1e-12  # lets exact zeros match


class GoldenPolicy(Spec):
    """How a scenario's results are compared with its stored golden summary."""

    enabled: bool = Field(default=True, description="Keep and compare a golden summary.")
    rel_tol: float = Field(
        default=0.05, ge=0.0, le=10.0, description="Relative tolerance of every metric."
    )
    tolerances: dict[str, float] = Field(
        default_factory=dict,
        description="Relative tolerance per metric ('ttft_s.p99', every deployment) or per "
        "deployment metric ('tp.ttft_s.p99'); overrides rel_tol.",
    )
    metrics: tuple[str, ...] = Field(
        default=DEFAULT_METRICS,
        description="Metrics (dotted, per deployment) stored in the golden summary.",
    )


def golden_path(scenario_path: Path) -> Path:
    """Where the golden summary of `scenario_path` lives."""
    return scenario_path.parent / "golden" / f"{scenario_path.stem}.json"


def _lookup(node: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def summarize(results: Mapping[str, Any], policy: GoldenPolicy) -> dict[str, float]:
    """The numbers a golden file stores: `deployment.metric` -> value (missing/null left out)."""
    out: dict[str, float] = {}
    for dep in results.get("deployments", []):
        for metric in policy.metrics:
            value = _lookup(dep, metric)
            if isinstance(value, bool | int | float):
                out[f"{ident(str(dep.get('name', '')))}.{metric}"] = value
    return dict(sorted(out.items()))


def read_golden(path: Path) -> dict[str, float] | None:
    """Stored values, or None when there is no golden file yet."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        why = f"{path}: not valid JSON ({exc}); rewrite it with --update-golden"
        raise ValueError(why) from None
    values = data.get("values") if isinstance(data, dict) else None
    if not isinstance(values, dict):
        raise ValueError(
            f"{path}: not a golden summary (no 'values' object); rewrite it with --update-golden"
        )
    return values


def write_golden(path: Path, scenario: str, values: Mapping[str, float]) -> None:
    """Write a golden summary (sorted keys, so diffs stay readable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"scenario": scenario, "values": dict(sorted(values.items()))}
    path.write_text(json.dumps(body, indent=2) + "\n")


@dataclass(frozen=True, kw_only=True)
class GoldenDiff:
    """One metric compared with its golden value."""

    metric: str
    golden: float | None
    current: float | None
    rel_tol: float
    ok: bool

    @property
    def detail(self) -> str:
        if self.golden is None:
            return "not in the golden file; review and run with --update-golden"
        if self.current is None:
            return "no longer reported; review and run with --update-golden"
        base = abs(self.golden) if self.golden else 1.0
        change = (self.current - self.golden) / base
        return f"changed {change:+.2%} (tolerance {self.rel_tol:.0%})"


def tolerance(metric: str, policy: GoldenPolicy) -> float:
    """Relative tolerance for `dep.metric`: exact key, then metric alone, then rel_tol."""
    bare = metric.split(".", 1)[1] if "." in metric else metric
    return policy.tolerances.get(metric, policy.tolerances.get(bare, policy.rel_tol))


def compare(
    current: Mapping[str, float], golden: Mapping[str, float], policy: GoldenPolicy
) -> list[GoldenDiff]:
    """Every metric of either side, compared; a metric only on one side does not match."""
    diffs = []
    for metric in sorted(set(current) | set(golden)):
        cur, gold = current.get(metric), golden.get(metric)
        tol = tolerance(metric, policy)
        ok = (
            cur is not None
            and gold is not None
            and abs(float(cur) - float(gold)) <= tol * abs(float(gold)) + ABS_TOL
        )
        diffs.append(GoldenDiff(metric=metric, golden=gold, current=cur, rel_tol=tol, ok=ok))
    return diffs
