"""`mlasim models / gpus / profiles`: the catalog as tables and as JSON."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from sim.catalog import gpu_names, load_gpu, model_names
from sim.catalog.profiles import profile_names
from sim.cli import app
from sim.specs.gpu import MIB

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


def test_profiles_say_engine_version_stack_and_where_each_family_comes_from() -> None:
    rows = {r["name"]: r for r in _json("profiles")}
    trt = rows["h200-trtllm"]
    assert trt["engine"] == "trtllm" and trt["version"] == "1.3.0rc20"
    assert "production kernels" in str(trt["stack"])
    assert {"gemm", "mla_decode", "moe", "collectives"} <= set(str(trt["published"]).split(", "))
    assert "elementwise" in str(trt["roofline"])
    measured = rows["h200-measured"]
    assert "torch + Triton" in str(measured["stack"]) and "not production" in str(measured["stack"])
    assert "gemm" in str(measured["measured"]) and rows["h200-roofline"]["published"] == "-"


def test_gpus_memory_columns_carry_their_units() -> None:
    rows = {r["name"]: r for r in _json("gpus")}
    h200 = rows["h200"]
    assert h200["hbm_gb"] == 141.0  # as the datasheet prints it
    assert h200["hbm_usable_mib"] == 143_771  # nvidia-smi memory.total
    assert h200["hbm_usable_gib"] == 140.4 and h200["hbm_usable_gb"] == 150.75
    for name, r in rows.items():
        g = load_gpu(name)
        # usable is what memory plans divide up; in GiB it never exceeds the datasheet figure
        assert r["hbm_usable_mib"] * MIB == g.hbm_bytes
        assert r["hbm_usable_gb"] == round(g.hbm_bytes / 1e9, 2)
        assert r["hbm_usable_gib"] <= r["hbm_gb"] < r["hbm_usable_gb"], name
    table = " ".join(RUNNER.invoke(app, ["gpus"]).output.split())
    for header in ("datasheet HBM", "usable MiB", "usable GiB", "usable GB (10^9 B)"):
        assert header in table
    assert "HBM GB" not in table
    assert "│ 141 GB │ 143,771 │ 140.4 │ 150.75 │" in table


def test_gpus_usable_gb_is_what_memory_divides() -> None:
    usable = {r["name"]: r["hbm_usable_gb"] for r in _json("gpus")}["h100"]
    args = ["memory", "--model", "deepseek-v3", "--gpu", "h100", "--gpus", "8", "--attn-tp", "8"]
    res = RUNNER.invoke(app, [*args, "--weight-dtype", "fp4", "--json"])
    plan = json.loads(res.output)
    assert plan["usable_bytes_per_gpu"] / 1e9 == pytest.approx(0.9 * usable, abs=0.01)
    refused = " ".join(RUNNER.invoke(app, args).output.split())
    assert f"that --mem-fraction 0.9 leaves of the {usable:.1f} GB" in refused


def test_catalog_flags_show_no_value() -> None:
    for command in ("models", "gpus", "profiles"):
        help_text = RUNNER.invoke(app, [command, "--help"]).output
        assert "<bool>" not in next(x for x in help_text.splitlines() if " --json " in x)
