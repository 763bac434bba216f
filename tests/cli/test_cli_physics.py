"""`mlasim cost / ai / memory / models / gpus` as a user runs them."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from sim.cli import app

runner = CliRunner()


def run_json(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_cost_decode_8k() -> None:
    out = run_json("cost", "--model", "deepseek-v3", "--q", "1", "--kv", "8192")
    assert round(out["expand"]["flops"] / 1e9, 1) == 275.5
    assert round(out["absorb"]["flops"] / 1e9, 1) == 2.3
    assert out["cheaper"] == "absorb"
    assert out["policies"] == {"flops_optimal": "absorb", "sglang": "absorb", "vllm": "absorb"}
    assert 160 < out["crossover_q"] < 171


def test_cost_no_rope_and_user_config(tmp_path) -> None:
    cfg = json.loads(
        (
            __import__("sim.catalog", fromlist=["x"]).CATALOG_DIR / "models" / "kimi-k3.json"
        ).read_text()
    )
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    out = run_json("cost", "--model", str(path), "--q", "1", "--kv", "2048", "--no-rope")
    assert round(out["absorb"]["flops"] / 1e9, 2) == 0.43
    assert out["heads"] == 96


def test_memory_tp8_vs_dp8() -> None:
    tp = run_json(
        "memory", "--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--attn-tp", "8"
    )
    dp = run_json(
        "memory", "--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--attn-tp", "1"
    )
    assert tp["kv_dup_factor"] == 8 and dp["kv_dup_factor"] == 1
    assert tp["kv_bytes_per_token_per_gpu"] == 576 * 61 * 2
    assert (
        3 * tp["kv_capacity_tokens_total"]
        < dp["kv_capacity_tokens_total"]
        < 8 * tp["kv_capacity_tokens_total"]
    )


def test_ai_table_has_ridge_and_families() -> None:
    out = run_json("ai", "--gpu", "h200")
    assert round(out["ridge_flop_per_byte"]) == 206
    mla = [r for r in out["rows"] if r["model"] == "deepseek-v3" and r["family"].startswith("MLA")]
    assert [round(r["flop_per_byte"], 1) for r in mla] == [241.8, 483.6, 725.3, 967.1]
    assert mla[0]["bound"] == "compute"  # 241.8 > H200's 206


def test_usage_errors_exit_2_and_explain() -> None:
    r = runner.invoke(app, ["cost", "--model", "nope", "--q", "1", "--kv", "2"])
    assert r.exit_code == 2 and "known models are" in r.output
    r = runner.invoke(app, ["cost", "--model", "deepseek-v3", "--q", "10", "--kv", "2"])
    assert r.exit_code == 2 and "q <= kv" in r.output
    r = runner.invoke(
        app, ["memory", "--model", "deepseek-v3", "--gpu", "h800", "--gpus", "8", "--attn-tp", "8"]
    )
    assert r.exit_code == 2 and "does not fit" in r.output


def test_catalog_listings() -> None:
    assert "deepseek-v3.2" in runner.invoke(app, ["models"]).output
    assert "206" in runner.invoke(app, ["gpus"]).output
