"""Small scenarios (one 8-GPU node, seconds of simulated time) for search tests."""

from __future__ import annotations

from typing import Any

from sim.specs.scenario import Scenario

TINY: dict[str, Any] = {
    "name": "tiny",
    "model": "deepseek-v3",
    "gpu": "h200",
    "deployments": [
        {"name": "tp8", "attn_tp": 8, "moe_tp": 8},
        {"name": "dp8_ep8", "attn_tp": 1, "moe_ep": 8},
    ],
    "workload": {
        "kind": "poisson",
        "rate_req_s": 4.0,
        "input": {"kind": "fixed", "tokens": 1000},
        "output": {"kind": "fixed", "tokens": 50},
    },
    "slo": {"ttft_s": 0.5, "tpot_s": 0.1, "percentile": 90},
    "run": {"duration_s": 8.0, "warmup_s": 1.0, "seed": 1},
}


def tiny(**changes: Any) -> Scenario:
    """TINY with top-level keys replaced (`workload=...`, `deployments=...`)."""
    return Scenario.model_validate(TINY | changes)
