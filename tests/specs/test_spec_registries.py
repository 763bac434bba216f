"""Names a scenario may use for routers and MLA policies are exactly those implemented."""

from __future__ import annotations

from sim.cost.dispatch import policy_names
from sim.engine.router import ROUTERS
from sim.specs import Scenario
from sim.specs.deployment import MLA_POLICY_NAMES, ROUTER_NAMES


def test_spec_names_match_the_registries() -> None:
    assert sorted(ROUTER_NAMES) == sorted(ROUTERS)
    assert sorted(MLA_POLICY_NAMES) == policy_names()


def test_schema_lists_the_choices() -> None:
    props = Scenario.model_json_schema()["$defs"]["Deployment"]["properties"]
    assert props["router"]["enum"] == list(ROUTER_NAMES)
    assert props["mla_policy"]["enum"] == list(MLA_POLICY_NAMES)
    assert "expert_zipf_exponent" in props and "expert_zipf_s" not in props
