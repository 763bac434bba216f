"""Launch commands use only flags from the engines' stored flag lists."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from sim.catalog import load_gpu
from sim.plan.launch import FLAGS_FILE, launch_commands, sglang_command
from sim.specs.deployment import Deployment, PdDeployment

ROOT = Path(__file__).resolve().parents[2]
STORED = json.loads(FLAGS_FILE.read_text())


def flags_of(command: str) -> list[str]:
    """The flag names of a command's non-comment lines."""
    words = [w for line in command.splitlines() if not line.startswith("#")
             for w in shlex.split(line)]  # fmt: skip
    return [w for w in words if w.startswith("--")]


def check(commands: dict[str, list[str]]) -> None:
    for engine, cmds in commands.items():
        known = set(STORED[engine]["flags"])
        for c in cmds:
            body = [line for line in c.splitlines() if not line.startswith("#")]
            assert len(body) == 1 and body[0].startswith(STORED[engine]["command"])
            unknown = [f for f in flags_of(c) if f not in known]
            assert not unknown, f"{engine} flags not in the stored list: {unknown}"


@pytest.mark.parametrize(
    "dep",
    [
        Deployment(name="dp", attn_tp=1, moe_ep=16, nodes=2, mtp_draft_tokens=1,
                   mtp_acceptance=(0.85,), kv_dtype="fp8", two_batch_overlap=True,
                   eplb_redundant_experts=32),
        Deployment(name="tp", attn_tp=8, moe_tp=8, dense_ffn="unit", lm_head="unit",
                   mixed_chunk=False, weight_dtype="fp4"),
        PdDeployment(name="pd", prefill=Deployment(name="p", replicas=2),
                     decode=Deployment(name="d", mtp_draft_tokens=2, mtp_acceptance=(0.8,))),
    ],
    ids=["dp-ep-2-nodes", "tp8", "pd"],
)  # fmt: skip
def test_every_flag_is_one_the_engine_documents(dep: Deployment | PdDeployment) -> None:
    cmds = launch_commands("deepseek-v3", dep, load_gpu("h200"), copies=3)
    check(cmds)
    if isinstance(dep, PdDeployment):
        assert "--disaggregation-mode prefill" in cmds["sglang"][0]
        assert "--kv-transfer-config" in cmds["vllm"][1]


def test_the_plan_commands_check_out(tmp_path: Path) -> None:
    """The commands the planner prints for its top candidates."""
    from sim.plan.planner import make_plan
    from sim.search.backends import SerialBackend
    from tests.plan.plan_helpers import tiny

    with SerialBackend() as b:
        plan = make_plan(tiny(), b)
    assert plan.top
    for row in plan.top:
        check(row["launch"])
        sglang = row["launch"]["sglang"][0]
        assert "--tp-size 8" in sglang and "--kv-cache-dtype fp8_e4m3" in sglang


def test_a_setting_without_a_flag_is_a_comment_not_a_flag() -> None:
    d = Deployment(name="tp", attn_tp=8, moe_tp=8, dense_ffn="dp")
    out = launch_commands("deepseek-v3", d, load_gpu("h200"), copies=1)
    assert "# " in out["vllm"][0] and "no flag" in out["vllm"][0]
    dp = Deployment(name="dp", attn_tp=1, dense_ffn="dp")
    assert "SGLang has no flag" in sglang_command("deepseek-v3", dp, load_gpu("h200"))


def test_the_stored_lists_name_their_source_and_the_docs_list_the_same_flags() -> None:
    doc = (ROOT / "docs" / "launch-flags.md").read_text()
    for engine, entry in STORED.items():
        assert entry["source"].startswith("https://github.com/") and "@" in entry["version"]
        assert entry["version"] in doc
        missing = [f for f in entry["flags"] if f"`{f}`" not in doc]
        assert not missing, f"docs/launch-flags.md lacks {engine} flags {missing}"
