"""A deployment's `engine` picks its production-kernel profile when the scenario names none;
the fused MoE table then prices the routed experts, at the measured cost of the load skew."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile, scenario_profile_name
from sim.cost.batch import BatchShape
from sim.cost.serving import ServingCostModel
from sim.run import build_costs
from sim.specs.deployment import Deployment
from sim.specs.profile import Profile
from sim.specs.scenario import Scenario


def test_engine_picks_its_bundled_profile_else_the_roofline() -> None:
    assert scenario_profile_name(None, "h200", "trtllm") == "h200-trtllm"
    assert scenario_profile_name(None, "h100", "trtllm") == "h100-roofline"  # none bundled
    assert scenario_profile_name(None, "h200", None) == "h200-roofline"
    assert scenario_profile_name("h200-measured", "h200", "sglang") == "h200-measured"


def _scenario(profile: str | None, *engines: str | None) -> Scenario:
    data: dict[str, Any] = {
        "name": "s",
        "model": "deepseek-v3",
        "gpu": "h200",
        "deployments": [
            {"name": f"d{i}", "attn_tp": 8, "moe_tp": 8, "engine": e} for i, e in enumerate(engines)
        ],
        "workload": {
            "kind": "closed",
            "concurrency": 8,
            "input": {"kind": "fixed", "tokens": 100},
            "output": {"kind": "fixed", "tokens": 10},
        },
        "slo": {"ttft_s": 1.0, "tpot_s": 0.1},
        "run": {"duration_s": 1.0, "warmup_s": 0.0, "seed": 1},
    }
    if profile is not None:
        data["profile"] = profile
    return Scenario.model_validate(data)


def _profiles_built(scenario: Scenario) -> list[str | None]:
    seen: list[str | None] = []

    def factory(model: Any, gpu: Any, dep: Deployment, profile: Profile | None) -> Any:
        seen.append(profile.name if profile else None)
        return object()

    default = load_profile("h200-roofline")
    for dep in scenario.deployments:
        build_costs(scenario, dep, cost_factory=factory, profile=default)
    return seen


def test_each_deployment_gets_its_engines_profile_unless_the_scenario_names_one() -> None:
    picked = _profiles_built(_scenario(None, "trtllm", "sglang", None, "vllm"))
    assert picked == ["h200-trtllm", "h200-sglang", "h200-roofline", "h200-vllm"]
    assert _profiles_built(_scenario("h200-measured", "trtllm")) == ["h200-roofline"]


def _decode_step(profile: str, zipf: float, **layout: Any) -> ServingCostModel:
    dep = Deployment(name="x", expert_zipf_exponent=zipf, **layout)
    return ServingCostModel(load_model("deepseek-v3"), load_gpu("h200"), dep, load_profile(profile))


def _routed(cost: ServingCostModel, per_rank: int) -> Any:
    ranks = cost.deployment.gpus // cost.deployment.attn_tp
    n = ranks * per_rank
    batch = BatchShape(
        num_ranks=ranks,
        rank=np.repeat(np.arange(ranks), per_rank),
        new_tokens=np.ones(n, dtype=np.int64),
        kv_tokens=np.full(n, 1024, dtype=np.int64),
        is_decode=np.ones(n, dtype=bool),
    )
    return cost.step_cost(batch).ops["moe_routed"]


def test_routed_experts_come_from_the_fused_table_and_skew_costs_what_it_measured() -> None:
    even = _routed(_decode_step("h200-trtllm", 0.0, attn_tp=1), 64)
    skewed = _routed(_decode_step("h200-trtllm", 1.2, attn_tp=1), 64)
    assert even.source == "published" and not even.extrapolated
    assert skewed.source == "published" and not skewed.extrapolated
    # 512 tokens over EP8 at the table's own points (layers x one fused-MoE latency each)
    table = {
        t.key["power_law_alpha"]: t
        for t in load_profile("h200-trtllm").tables
        if t.op == "moe"
        and t.key["experts"] == 256
        and t.key["moe_ep"] == 8
        and t.key["moe_tp"] == 1
        and t.dtype == "fp8"
    }
    m = load_model("deepseek-v3")
    layers = m.num_layers - m.moe.first_dense_layers
    for alpha, got in ((0.0, even), (1.2, skewed)):
        point = next(p for p in table[alpha].points if p.at["tokens"] == 512)
        assert got.seconds == pytest.approx(layers * point.latency_us_p50 * 1e-6, rel=1e-9)
    assert skewed.seconds > even.seconds


def test_default_skew_reads_the_measured_power_law_table() -> None:
    """The default Zipf exponent is defined as aiconfigurator-core's power law 1.01: its routed
    experts read that table as measured, and even routing reads the balanced one."""
    from sim.cost.routed import table_power_law
    from sim.specs.deployment import DEFAULT_EXPERT_ZIPF_EXPONENT

    assert table_power_law(DEFAULT_EXPERT_ZIPF_EXPONENT) == 1.01
    assert table_power_law(0.0) == 0.0
    assert table_power_law(1.2) == 1.2
