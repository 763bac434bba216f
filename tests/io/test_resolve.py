"""`sim.io.resolve`: a scenario's names looked up once, errors that carry their field."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

import sim.catalog
import sim.catalog.profiles
import sim.cli.run
import sim.io.scenario_io
import sim.metrics.notes
import sim.run
from sim.cli import app
from sim.io.resolve import resolve
from sim.io.scenario_io import load_resolved
from sim.specs.base import FieldError
from sim.specs.scenario import Scenario

SCENARIO = """\
name: once
model: deepseek-v3
gpu: h200
deployments:
  - {name: tp8, attn_tp: 8, moe_tp: 8}
  - {name: dp8_ep8, attn_tp: 1, moe_ep: 8, engine: sglang}
workload:
  kind: poisson
  rate_req_s: 2
  input: {kind: fixed, tokens: 500}
  output: {kind: fixed, tokens: 20}
slo: {ttft_s: 2, tpot_s: 0.1}
run: {duration_s: 3, warmup_s: 0.5, seed: 1}
"""

LOADERS = {
    "load_model": sim.catalog.load_model,
    "load_gpu": sim.catalog.load_gpu,
    "load_profile": sim.catalog.profiles.load_profile,
}


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> Counter[tuple[str, str]]:
    """(loader, name) -> calls, counting every catalog lookup in any `sim` module: each module
    that imported a loader by name gets the counting one, and so do the catalog modules."""
    calls: Counter[tuple[str, str]] = Counter()
    for module in [m for n, m in sys.modules.items() if n.startswith("sim") and m is not None]:
        for fn, original in LOADERS.items():
            if getattr(module, fn, None) is original:

                def counted(name: object, _fn: str = fn, _orig: object = original) -> object:
                    calls[(_fn, str(name))] += 1
                    return _orig(name)  # type: ignore[operator]

                monkeypatch.setattr(module, fn, counted)
    return calls


def test_mlasim_run_looks_each_name_up_once(
    tmp_path: Path, lookups: Counter[tuple[str, str]]
) -> None:
    path = tmp_path / "once.yaml"
    path.write_text(SCENARIO)
    res = CliRunner().invoke(app, ["run", str(path)])
    assert res.exit_code == 0, res.output
    assert lookups == {
        ("load_gpu", "h200"): 1,
        ("load_model", "deepseek-v3"): 1,
        ("load_profile", "h200-roofline"): 1,  # the scenario's default
        ("load_profile", "h200-sglang"): 1,  # dp8_ep8's engine
    }


def test_running_a_resolved_scenario_looks_nothing_up(
    tmp_path: Path, lookups: Counter[tuple[str, str]]
) -> None:
    path = tmp_path / "once.yaml"
    path.write_text(SCENARIO)
    resolved = load_resolved(path)
    assert sum(lookups.values()) == 4
    lookups.clear()
    results = sim.run.run_scenario(resolved)
    assert [d.name for d in results.deployments] == ["tp8", "dp8_ep8"]
    assert not lookups


def _scenario(**changes: object) -> Scenario:
    data = sim.io.scenario_io.yaml.safe_load(SCENARIO) | changes
    return Scenario.model_validate(data)


def test_a_scenario_validates_its_shape_only() -> None:
    sc = _scenario(model="deepseek-v9")  # no catalog lookup: the name is resolved later
    with pytest.raises(FieldError) as err:
        resolve(sc)
    assert err.value.loc == ("model",) and err.value.message.startswith("unknown model")
    assert str(err.value).startswith("model: unknown model 'deepseek-v9'")


def test_a_deployment_the_model_cannot_run_is_located() -> None:
    deps = [{"name": "tp8", "attn_tp": 8, "moe_tp": 8, "dsa": "on"}]  # V3 has no DSA indexer
    with pytest.raises(FieldError) as err:
        resolve(_scenario(deployments=deps))
    assert err.value.loc == ("deployments", 0, "dsa")
    assert str(err.value).startswith("deployments[0] (tp8).dsa='on' but deepseek-v3 has no DSA")


def test_weights_default_to_the_checkpoints_own() -> None:
    sc = _scenario(model="qwen3-235b-a22b", deployments=[{"name": "tp8", "attn_tp": 8}])
    assert resolve(sc).scenario.deployments[0].weight_dtype == "bf16"
    given = [{"name": "tp8", "attn_tp": 8, "weight_dtype": "fp8"}]
    sc = _scenario(model="qwen3-235b-a22b", deployments=given)
    assert resolve(sc).scenario.deployments[0].weight_dtype == "fp8"
