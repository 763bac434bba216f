"""The validation scenarios run on the published H800 kernels, transferred to H100."""

from __future__ import annotations

from pathlib import Path

from sim.io.scenario_io import load_scenario
from sim.run import run_scenario

VALIDATION = Path(__file__).resolve().parents[2] / "scenarios" / "validation"


def test_decode_validation_uses_published_kernels_marked_extrapolated() -> None:
    scenario = load_scenario(VALIDATION / "sglang-decode-h100.yaml")
    scenario = scenario.model_copy(
        update={"run": scenario.run.model_copy(update={"duration_s": 6.0, "warmup_s": 2.0})}
    )
    res = run_scenario(scenario)
    dep = res.deployment("decode_no_tbo")
    assert dep.step_sources["attn_decode"] == "published"
    assert dep.step_sources["ep_dispatch"] == "published"
    assert dep.step_sources["mla_bmm"] == "roofline"  # no bmm table: said so
    pool = dep.pools[0]
    assert "attn_decode" in pool.extrapolated_ops  # H800 efficiencies on an H100
    assert dep.output_tok_s_per_node > 0
