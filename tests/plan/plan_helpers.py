"""One tiny plan request for the planner tests: DeepSeek-V3 on H200, two colocated layouts."""

from __future__ import annotations

from typing import Any

from sim.plan.spec import PlanRequest

TINY_SPACE: dict[str, Any] = {
    "nodes": [1], "attn_tp": [8], "moe": ["ep"], "mtp_draft_tokens": [0], "kv_dtype": ["fp8"],
    "pd": False, "loads": 2,
}  # fmt: skip
# short answers keep each request's life (and each probe) short
TINY: dict[str, Any] = {
    "model": "deepseek-v3", "gpus": ["h200"],
    "input": {"kind": "fixed", "tokens": 1000}, "output": {"kind": "fixed", "tokens": 100},
    "slo": {"ttft_s": 2.0, "tpot_s": 0.06, "percentile": 90}, "rate_req_s": 6.0,
    "space": TINY_SPACE, "probe": {"window_lifetimes": 3.0, "max_window_lifetimes": 3.0},
}  # fmt: skip


def tiny(**changes: Any) -> PlanRequest:
    return PlanRequest.model_validate({**TINY, **changes})
