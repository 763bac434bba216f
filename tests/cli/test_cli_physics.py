"""`mlasim cost / ai / memory / models / gpus` as a user runs them."""

from __future__ import annotations

import inspect
import json

import pytest
import typer
from typer.testing import CliRunner

from sim.catalog import load_gpu, load_model
from sim.cli import app
from sim.cli import memory as cli_memory
from sim.cost.memory import MemoryPlan, plan_memory
from sim.specs.deployment import Deployment

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


# --- memory: options a scenario deployment has, errors in option words ---------------------

MEMORY = ["memory", "--model", "deepseek-v3", "--gpu", "h200"]
WIDE = CliRunner(env={"COLUMNS": "200"})  # long messages stay on one line


def said(*args: str) -> str:
    """What a refused `mlasim` command prints (exit 2), on one line."""
    result = WIDE.invoke(app, list(args))
    assert result.exit_code == 2, result.output
    return " ".join(result.output.split())


def plan_for(**deployment: object) -> MemoryPlan:
    dep = Deployment.model_validate({"name": "x", **deployment})
    return plan_memory(load_model("deepseek-v3"), load_gpu("h200"), dep)


def test_a_bad_gpu_count_names_the_option_typed() -> None:
    out = said(*MEMORY, "--gpus", "-8", "--attn-tp", "1")
    assert "error: --gpus -8: a count of GPUs, at least 1; e.g. --gpus 8" in out
    assert "--gpus-per-node" not in out
    # zero counts used to end in a ZeroDivisionError traceback (exit 1)
    for option in ("--gpus", "--gpus-per-node", "--moe-tp", "--moe-ep"):
        args = {"--gpus": "8", "--gpus-per-node": "8", "--moe-tp": "1", option: "0"}
        out = said(*MEMORY, "--attn-tp", "1", *(x for kv in args.items() for x in kv))
        assert f"error: {option} 0: a count of GPUs, at least 1" in out


def test_layout_errors_say_the_fix_in_options() -> None:
    out = said(*MEMORY, "--gpus", "12", "--attn-tp", "1")
    assert "--gpus 12 is not a whole number of 8-GPU nodes" in out and "e.g. --gpus 16" in out
    out = said(*MEMORY, "--gpus", "8", "--attn-tp", "8", "--moe-tp", "3")
    assert "--moe-tp 3 must divide --gpus 8; pick one of 1, 2, 4, 8" in out
    out = said(*MEMORY, "--gpus", "8", "--attn-tp", "8", "--moe-ep", "4")
    assert "--moe-ep 4 x --moe-tp 1 = 4 must equal --gpus 8; use --moe-ep 8" in out
    out = said(*MEMORY, "--gpus", "16", "--attn-tp", "3")
    assert "the unit's 16 GPUs (2 nodes of 8)" in out and "nodes x" not in out
    out = said(*MEMORY, "--gpus", "8", "--attn-tp", "3")
    assert "the unit's 8 GPUs; pick a divisor of 8" in out and "1 nodes" not in out


def test_moe_tp_gives_the_scenario_tp8_plan() -> None:
    base = [*MEMORY[1:], "--gpus", "8", "--attn-tp", "8"]
    tp8 = run_json("memory", *base, "--moe-tp", "8")
    plan = plan_for(attn_tp=8, moe_tp=8)
    assert tp8["kv_capacity_tokens_per_gpu"] == plan.kv_capacity_tokens_per_gpu
    assert tp8["weights_bytes_per_gpu"] == plan.weights_bytes_per_gpu
    assert (tp8["moe_ep"], tp8["moe_tp"]) == (1, 8)
    # whole 64-token pages, as `mlasim run` counts: the default study's TP8 capacity (README)
    assert tp8["kv_capacity_tokens_total_whole_pages"] == 693_824
    # without --moe-tp the experts stay EP-sharded, as Deployment's default: more weights
    ep8 = run_json("memory", *base)
    assert ep8["kv_capacity_tokens_per_gpu"] == plan_for(attn_tp=8).kv_capacity_tokens_per_gpu
    assert ep8["weights_bytes_per_gpu"] > tp8["weights_bytes_per_gpu"]
    dp8 = run_json("memory", *MEMORY[1:], "--gpus", "8", "--attn-tp", "1", "--moe-ep", "8")
    assert dp8["kv_capacity_tokens_total_whole_pages"] == 3_694_080  # README's DP8 figure


@pytest.mark.parametrize(
    ("options", "fields"),
    [
        (["--dense-ffn", "unit", "--lm-head", "unit"], {"dense_ffn": "unit", "lm_head": "unit"}),
        (["--eplb-redundant-experts", "32"], {"eplb_redundant_experts": 32}),
        (
            ["--mem-fraction", "0.95", "--activation-reserve-gb", "0"],
            {"mem_fraction": 0.95, "activation_reserve_gb": 0},
        ),
        (
            ["--kv-dtype", "fp8", "--weight-dtype", "fp4"],
            {"kv_dtype": "fp8", "weight_dtype": "fp4"},
        ),
        (["--mtp", "1"], {"mtp_draft_tokens": 1, "mtp_acceptance": (0.8,)}),
    ],
)
def test_memory_options_set_the_deployment_fields(options: list[str], fields: dict) -> None:
    out = run_json("memory", *MEMORY[1:], "--gpus", "8", "--attn-tp", "1", *options)
    plan, default = plan_for(attn_tp=1, **fields), plan_for(attn_tp=1)
    assert out["weights_bytes_per_gpu"] == plan.weights_bytes_per_gpu
    assert out["kv_capacity_tokens_per_gpu"] == plan.kv_capacity_tokens_per_gpu
    assert out["usable_bytes_per_gpu"] == plan.usable_bytes_per_gpu
    assert plan.kv_capacity_tokens_per_gpu != default.kv_capacity_tokens_per_gpu  # it changed


def test_memory_defaults_are_the_deployment_defaults() -> None:
    params = inspect.signature(cli_memory.memory).parameters
    renamed = {"mtp": "mtp_draft_tokens"}
    # weight_dtype: None, the checkpoint's own, as a scenario deployment that leaves it out
    assert params["weight_dtype"].default is None
    for name in ("moe_tp", "moe_ep", "kv_dtype", "mtp", "dense_ffn", "lm_head",
                 "eplb_redundant_experts", "dsa", "mem_fraction", "activation_reserve_gb",
                 "gpus_per_node"):  # fmt: skip
        field = renamed.get(name, name)
        assert params[name].default == Deployment.model_fields[field].default, name
        assert field in cli_memory.MEMORY_OPTIONS


def test_does_not_fit_speaks_options_and_its_fixes_fit() -> None:
    out = said("memory", "--model", "deepseek-v3", "--gpu", "h100", "--gpus", "8", "--attn-tp", "8")
    assert "deepseek-v3 does not fit on 8 x H100 SXM" in out
    assert "the 77.0 GB that --mem-fraction 0.9 leaves of the 85.5 GB (79.6 GiB)" in out
    assert "KV of one 8,192-token prefill chunk" in out
    assert out.endswith("to fit, use --gpus 16 or --weight-dtype fp4")
    for scenario_word in ("deployment 'memory'", "weight_dtype", "mem_fraction", "nodes x"):
        assert scenario_word not in out
    # each suggested change is enough alone
    base = ["memory", "--model", "deepseek-v3", "--gpu", "h100", "--attn-tp", "8"]
    for fix in (["--gpus", "16"], ["--gpus", "8", "--weight-dtype", "fp4"]):
        assert WIDE.invoke(app, [*base, *fix]).exit_code == 0
    # a raised --mem-fraction is offered when one would do, to the hundredth
    reserve = ["--gpus", "8", "--attn-tp", "1", "--activation-reserve-gb", "40"]
    out = said(*MEMORY, *reserve)
    fraction = out.rsplit("--mem-fraction ", 1)[1]
    assert WIDE.invoke(app, [*MEMORY, *reserve, "--mem-fraction", fraction]).exit_code == 0
    lower = f"{float(fraction) - 0.01:.2f}"
    assert WIDE.invoke(app, [*MEMORY, *reserve, "--mem-fraction", lower]).exit_code == 2


def test_memory_help_explains_every_option_and_flags_take_no_value() -> None:
    command = typer.main.get_command(app).commands["memory"]  # type: ignore[attr-defined]
    for param in command.params:
        assert param.help, f"{param.opts} has no help text"
    lines = WIDE.invoke(app, ["memory", "--help"]).output.splitlines()
    assert "GPUs per node" in next(x for x in lines if " --gpus-per-node " in x)
    assert "<bool>" not in next(x for x in lines if " --json " in x)
    assert "<int>" in next(x for x in lines if " --moe-tp " in x)  # options with values keep it
