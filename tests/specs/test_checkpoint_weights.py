"""A checkpoint's weight dtype comes from its quantization_config (none: BF16), a deployment
that leaves weight_dtype out serves it, and --model takes a HuggingFace model folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.catalog import CatalogError, load_model
from sim.io.resolve import resolve
from sim.specs.hf_config import checkpoint_weight_dtype
from sim.specs.scenario import Scenario
from tests.builders import poisson, tiny

CATALOG = Path(__file__).resolve().parents[2] / "sim" / "catalog" / "models"


def test_quantization_config_names_the_weight_dtype() -> None:
    assert checkpoint_weight_dtype({}, "m") == "bf16"
    assert checkpoint_weight_dtype({"quantization_config": {"quant_method": "fp8"}}, "m") == "fp8"
    assert checkpoint_weight_dtype({"quantization_config": {"quant_method": "mxfp4"}}, "m") == "fp4"
    with pytest.raises(ValueError, match="quant_method 'awq'"):
        checkpoint_weight_dtype({"quantization_config": {"quant_method": "awq"}}, "m")


def test_catalog_models_carry_their_checkpoint_dtype() -> None:
    assert load_model("deepseek-v3").weight_dtype == "fp8"
    assert load_model("qwen3-235b-a22b").weight_dtype == "bf16"  # no quantization_config
    assert load_model("kimi-k3").weight_dtype == "fp4"


def _scenario(model: str, **dep: object) -> Scenario:
    """The scenario as a run sees it: resolved, which spells out each deployment's weights."""
    return resolve(_shape(model, **dep)).scenario


def _shape(model: str, **dep: object) -> Scenario:
    return tiny(
        name="w", model=model,
        deployments=[{"name": "d", "attn_tp": 1, **dep},
                     {"name": "pd", "prefill": {"name": "p"}, "decode": {"name": "q"}}],
        workload=poisson(1, 10, 5), slo={"ttft_s": 1, "tpot_s": 1}, run={"duration_s": 10},
    )  # fmt: skip


def test_a_deployment_without_weight_dtype_serves_the_checkpoints() -> None:
    qwen = _scenario("qwen3-235b-a22b")
    assert qwen.deployments[0].weight_dtype == "bf16"
    assert qwen.deployments[1].decode.weight_dtype == "bf16"  # type: ignore[union-attr]
    assert _scenario("deepseek-v3").deployments[0].weight_dtype == "fp8"
    assert _scenario("qwen3-235b-a22b", weight_dtype="fp8").deployments[0].weight_dtype == "fp8"


def test_a_dump_keeps_the_weights_left_to_the_checkpoint() -> None:
    """A scenario rebuilt from a dump (a sweep point, a capacity probe, a worker's copy) before
    it was resolved still serves the checkpoint's weights once resolved."""
    again = Scenario.model_validate_json(_shape("qwen3-235b-a22b").model_dump_json())
    assert resolve(again).scenario.deployments[0].weight_dtype == "bf16"
    given = _shape("qwen3-235b-a22b", weight_dtype="fp8")
    assert "weight_dtype" in given.deployments[0].model_dump()
    assert "weight_dtype" not in _shape("qwen3-235b-a22b").deployments[0].model_dump()
    resolved = _scenario("qwen3-235b-a22b").model_dump_json()
    assert resolve(Scenario.model_validate_json(resolved)).scenario == _scenario("qwen3-235b-a22b")


def test_model_takes_a_huggingface_folder(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text((CATALOG / "qwen3-235b-a22b.json").read_text())
    assert (
        load_model(str(tmp_path)).num_layers
        == json.loads((CATALOG / "qwen3-235b-a22b.json").read_text())["num_hidden_layers"]
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CatalogError, match=r"without a config\.json"):
        load_model(str(empty))
