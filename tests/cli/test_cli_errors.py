"""Bad options of the physics commands: one `option: message` line and exit code 2."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from sim.cli import app

RUNNER = CliRunner(env={"COLUMNS": "200"})
MEMORY = ["memory", "--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8"]


def _said(args: list[str]) -> str:
    res = RUNNER.invoke(app, args)
    assert res.exit_code == 2, res.output
    return " ".join(res.output.split())


def test_memory_layout_error_names_the_option_without_pydantic_noise() -> None:
    out = _said([*MEMORY, "--attn-tp", "3"])
    assert "error: --attn-tp: attn_tp=3 must divide the unit's 8 GPUs" in out
    assert "validation error" not in out and "input_value" not in out
    assert "errors.pydantic.dev" not in out


def test_memory_bad_dtype_names_the_option() -> None:
    out = _said([*MEMORY, "--attn-tp", "8", "--kv-dtype", "fp9"])
    assert "error: --kv-dtype: Input should be 'bf16' or 'fp8'" in out


def test_a_model_config_that_is_not_one_is_a_message(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text('{"hidden_size": 7168}')
    out = _said(["cost", "--model", str(bad), "--q", "1", "--kv", "8192"])
    assert f"{bad}: not a usable model config" in out and "num_hidden_layers" in out


def test_an_mla_config_without_its_latent_is_refused_not_read_as_gqa(tmp_path: Path) -> None:
    import json

    from sim.catalog import CATALOG_DIR

    cfg = json.loads((CATALOG_DIR / "models" / "deepseek-v3.json").read_text())
    del cfg["kv_lora_rank"]
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps(cfg))
    out = _said(["memory", "--model", str(bad), "--gpu", "h200", "--gpus", "8", "--attn-tp", "8"])
    assert "looks like an MLA model (model_type 'deepseek_v3', qk_nope_head_dim" in out
    assert "lacks 'kv_lora_rank'" in out


def test_a_closed_loop_whose_requests_never_fit_is_a_message(tmp_path: Path) -> None:
    """100K-token prompts on TP8 ranks that hold ~62K tokens (a low mem_fraction): every
    request is refused, and the run stops with the deployment and its KV named."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: refused\nmodel: deepseek-v3\ngpu: h200\n"
        "deployments: [{name: tp8, attn_tp: 8, moe_tp: 8, mem_fraction: 0.62}]\n"
        "workload: {kind: closed, concurrency: 4, input: {kind: fixed, tokens: 100000},"
        " output: {kind: fixed, tokens: 10}}\n"
        "slo: {ttft_s: 3, tpot_s: 0.1}\nrun: {duration_s: 10, warmup_s: 0}\n"
    )
    out = _said(["run", str(scenario)])
    assert "deployment 'tp8': closed loop: 10,000 requests in a row were refused" in out
    assert re.search(r"\(KV per rank: [1-9][\d,]* tokens\)", out) and "Traceback" not in out
