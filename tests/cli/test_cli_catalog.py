"""`mlasim models / gpus / profiles`: the catalog as tables and as JSON."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from sim.catalog import gpu_names, model_names
from sim.catalog.profiles import profile_names
from sim.cli import app

RUNNER = CliRunner(env={"COLUMNS": "200"})


def _json(*args: str) -> list[dict[str, object]]:
    res = RUNNER.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    assert isinstance(rows, list)
    return rows


def test_models_json_lists_every_model_with_its_shape() -> None:
    rows = {r["name"]: r for r in _json("models")}
    assert set(rows) == set(model_names())
    assert rows["kimi-k2"]["heads"] == 64 and rows["kimi-k2"]["routed_experts"] == 384
    assert rows["deepseek-v3.2"]["dsa"] is True and rows["qwen3-235b-a22b"]["attention"] == "gqa"


def test_gpus_json_carries_the_ridge() -> None:
    rows = {r["name"]: r for r in _json("gpus")}
    assert set(rows) == set(gpu_names())
    assert rows["h200"]["ridge_flop_per_byte"] == 206.0 and rows["h20"]["hbm_gb"] == 96.0


def test_profiles_lists_provenance_and_tables() -> None:
    rows = {r["name"]: r for r in _json("profiles")}
    assert set(rows) == set(profile_names())
    assert rows["h800-published"]["kind"] == "published" and rows["h800-published"]["gpu"] == "h800"
    assert rows["h800-published"]["tables"] > 0 and rows["h200-roofline"]["tables"] == 0
    table = RUNNER.invoke(app, ["profiles"]).output
    assert "h800-published" in table and "published" in table
