"""`simulate_scenario` builds every cost model before simulating: a deployment that does not
fit fails at once, named once (with its PD pool)."""

from __future__ import annotations

from typing import Any

import pytest

from sim.io.scenario_io import parse_scenario
from sim.run import simulate_scenario
from tests.engine.fixed_cost import FixedCost

TEXT = """\
name: preflight
model: deepseek-v3
gpu: h200
deployments:
  - {name: first, attn_tp: 1}
  - name: pd
    prefill: {name: p, attn_tp: 1}
    decode: {name: d, attn_tp: 1}
workload:
  kind: poisson
  rate_req_s: 4
  input: {kind: fixed, tokens: 100}
  output: {kind: fixed, tokens: 5}
slo: {ttft_s: 2, tpot_s: 0.1}
run: {duration_s: 2, seed: 1}
"""


def test_a_later_deployment_that_does_not_fit_stops_the_run_before_it_starts() -> None:
    progress: list[str] = []

    def factory(model: Any, gpu: Any, dep: Any, profile: Any) -> FixedCost:
        if dep.role == "decode":  # the cost model names the pool spec it was given
            raise ValueError(f"deployment {dep.name!r} does not fit on {gpu.name}: too big")
        return FixedCost()

    with pytest.raises(ValueError) as info:
        simulate_scenario(
            parse_scenario(TEXT), cost_factory=factory, progress=lambda n, f: progress.append(n)
        )
    assert str(info.value) == "deployment 'pd.decode' does not fit on h200: too big"
    assert progress == []  # 'first' was not simulated


def test_a_message_without_the_name_gets_it_as_a_prefix() -> None:
    def factory(model: Any, gpu: Any, dep: Any, profile: Any) -> FixedCost:
        raise ValueError("no room")

    with pytest.raises(ValueError, match=r"^deployment 'first': no room$"):
        simulate_scenario(parse_scenario(TEXT), cost_factory=factory)
