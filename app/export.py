"""Files the app offers for download: scenario YAML (what `mlasim run` reads), results JSON/CSV."""

from __future__ import annotations

import json
from typing import Any

import yaml

from sim.api import Results, csv_text, results_dict
from sim.specs.scenario import Scenario


def scenario_yaml(scenario: Scenario) -> str:
    """The scenario as YAML, defaults left out so the file shows only what was chosen.

    `sim.io.scenario_io.parse_scenario` reads it back to an equal `Scenario`.
    """
    data = scenario.model_dump(mode="json", exclude_defaults=True)
    full = scenario.model_dump(mode="json")
    for i, (dep, whole) in enumerate(zip(data["deployments"], full["deployments"], strict=True)):
        if "prefill" in whole:  # PD entry: spell out each pool's layout
            for pool in ("prefill", "decode"):
                dep[pool] = _with_layout(dep.get(pool, {}), whole[pool])
        else:
            data["deployments"][i] = _with_layout(dep, whole)
    return yaml.safe_dump(_kind_first(data), sort_keys=False, allow_unicode=True)


LAYOUT = ("name", "nodes", "gpus_per_node", "attn_tp")


def _with_layout(short: dict[str, Any], whole: dict[str, Any]) -> dict[str, Any]:
    """Keep the layout fields even at their defaults: a reader sees TP vs DP at a glance."""
    head = {k: whole[k] for k in LAYOUT if k in whole}
    return head | {k: v for k, v in short.items() if k not in head}


def _kind_first(value: Any) -> Any:
    """Put each tagged union's `kind` first, as people write it."""
    if isinstance(value, dict):
        ordered = {"kind": value["kind"]} if "kind" in value else {}
        return ordered | {k: _kind_first(v) for k, v in value.items() if k != "kind"}
    if isinstance(value, list):
        return [_kind_first(v) for v in value]
    return value


def results_json(results: Results) -> str:
    return json.dumps(results_dict(results), indent=2) + "\n"


def results_csv(results: Results) -> str:
    """One row per deployment: the file `mlasim run --csv` writes."""
    return csv_text(results)
