"""Launch commands for a planned deployment: SGLang's `python -m sglang.launch_server` and
vLLM's `vllm serve`.

Every flag comes from `launch_flags.json`, the engines' own flag lists with the commit they were
read at (docs/launch-flags.md); `_Cmd.flag` refuses any other name, so a command never carries
an invented flag. A setting an engine has no flag for is left out and named in a `#` comment.
"""

from __future__ import annotations

import json
import shlex
from functools import cache
from pathlib import Path
from typing import Any

from sim.catalog import load_model
from sim.cost.activations import activation_reserve_bytes
from sim.specs.deployment import Deployment, PdDeployment
from sim.specs.gpu import GpuSpec

FLAGS_FILE = Path(__file__).with_name("launch_flags.json")
# catalog names whose HuggingFace repository is known; others print MODEL_PATH
HF_REPOS = {
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
    "kimi-k2": "moonshotai/Kimi-K2-Instruct",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B",
}
HEAD = "HEAD_NODE_IP"  # the first node's address, filled in by whoever launches


@cache
def engine_flags() -> dict[str, Any]:
    """The stored flag lists: {'sglang': {...}, 'vllm': {...}}, each with its source."""
    data: dict[str, Any] = json.loads(FLAGS_FILE.read_text())
    return data


class _Cmd:
    def __init__(self, engine: str, head: list[str]) -> None:
        self.known = set(engine_flags()[engine]["flags"])
        self.words = list(head)
        self.notes: list[str] = []

    def flag(self, name: str, value: object = None) -> None:
        if name not in self.known:
            raise KeyError(f"{name} is not in the stored flag list of this engine")
        self.words.append(name)
        if value is not None:
            self.words.append(str(value))

    def note(self, text: str) -> None:
        self.notes.append(f"# {text}")

    def text(self) -> str:
        line = " ".join(shlex.quote(w) for w in self.words)
        return "\n".join([*self.notes, line])


def model_path(model: str) -> str:
    return HF_REPOS.get(model, model if "/" in model else "MODEL_PATH")


def sglang_command(model: str, d: Deployment, gpu: GpuSpec, pd_role: str | None = None) -> str:
    """One SGLang server per unit (its nodes each run it with their --node-rank)."""
    c = _Cmd("sglang", ["python", "-m", "sglang.launch_server"])
    c.flag("--model-path", model_path(model))
    c.flag("--tp-size", d.gpus)
    if d.attn_dp > 1:
        c.flag("--dp-size", d.attn_dp)
        c.flag("--enable-dp-attention")
        if d.dense_ffn == "tp":
            c.flag("--moe-dense-tp-size", 1)
        elif d.dense_ffn == "dp":
            c.note("dense_ffn 'dp' (replicated dense MLP): SGLang has no flag for it")
        if d.lm_head == "rank":
            c.flag("--enable-dp-lm-head")
    if d.ep > 1:
        c.flag("--ep-size", d.ep)
        if d.moe_tp == 1:  # DeepEP's all-to-all: experts whole on each GPU
            c.flag("--moe-a2a-backend", "deepep")
    if d.eplb_redundant_experts:
        c.flag("--enable-eplb")
        c.flag("--ep-num-redundant-experts", d.eplb_redundant_experts)
    if d.two_batch_overlap:
        c.flag("--enable-two-batch-overlap")
    if d.mtp_draft_tokens:
        c.flag("--speculative-algorithm", "EAGLE")
        c.flag("--speculative-num-steps", d.mtp_draft_tokens)
        c.flag("--speculative-eagle-topk", 1)
        c.flag("--speculative-num-draft-tokens", d.mtp_draft_tokens + 1)
    if d.kv_dtype == "fp8":
        c.flag("--kv-cache-dtype", "fp8_e4m3")
    _weights_note(c, d)
    c.flag("--chunked-prefill-size", d.chunked_prefill_tokens)
    if d.mixed_chunk:
        c.flag("--enable-mixed-chunk")
    c.note(f"max running requests: {d.max_running_requests} per attention rank in the plan")
    c.flag("--max-running-requests", d.max_running_requests * d.attn_dp)
    # SGLang's static fraction covers weights + KV; the plan's mem_fraction also covers the
    # activation reserve, which SGLang keeps outside its static pool
    reserve_bytes = activation_reserve_bytes(load_model(model), d)
    static = d.mem_fraction - reserve_bytes / gpu.hbm_bytes
    c.flag("--mem-fraction-static", f"{static:.2f}")
    c.flag("--page-size", d.page_size_tokens)
    if pd_role:
        c.flag("--disaggregation-mode", pd_role)
        c.flag("--disaggregation-transfer-backend", "mooncake")
    if d.nodes > 1:
        c.flag("--nnodes", d.nodes)
        c.flag("--node-rank", 0)
        c.flag("--dist-init-addr", f"{HEAD}:5000")
        c.note(f"run on each of the {d.nodes} nodes with its own --node-rank (0..{d.nodes - 1})")
    if d.replicas > 1:
        c.note(f"{d.replicas} such units behind one router (e.g. sglang_router)")
    return c.text()


def vllm_command(model: str, d: Deployment, pd_role: str | None = None) -> str:
    """One `vllm serve` per unit: attention TP x DP ranks, experts over all of them with EP."""
    c = _Cmd("vllm", ["vllm", "serve", model_path(model)])
    c.flag("--tensor-parallel-size", d.attn_tp)
    if d.attn_dp > 1:
        c.flag("--data-parallel-size", d.attn_dp)
    if d.moe_tp == 1 and d.ep > 1:
        c.flag("--enable-expert-parallel")
    elif d.moe_tp < d.gpus:
        c.note(f"MoE EP{d.ep} x TP{d.moe_tp}: vLLM runs experts as EP over all ranks or TP over "
               "all ranks; this mix has no flag")  # fmt: skip
    if d.dense_ffn != "tp" or d.lm_head != "rank":
        c.note(f"dense_ffn {d.dense_ffn!r}, lm_head {d.lm_head!r}: vLLM shards both over "
               "attention TP and has no flag to place them otherwise")  # fmt: skip
    if d.eplb_redundant_experts:
        c.flag("--enable-eplb")
        c.note(f"{d.eplb_redundant_experts} redundant experts: set them in --eplb-config")
    if d.two_batch_overlap:
        c.flag("--enable-dbo")
    if d.mtp_draft_tokens:
        spec = {"method": "deepseek_mtp", "num_speculative_tokens": d.mtp_draft_tokens}
        c.flag("--speculative-config", json.dumps(spec))
    if d.kv_dtype == "fp8":
        c.flag("--kv-cache-dtype", "fp8")
    _weights_note(c, d)
    c.flag("--block-size", d.page_size_tokens)
    c.flag("--gpu-memory-utilization", d.mem_fraction)
    c.flag("--max-num-seqs", d.max_running_requests)
    c.flag("--enable-chunked-prefill")
    c.flag("--max-num-batched-tokens", d.chunked_prefill_tokens)
    if not d.mixed_chunk:
        c.note("mixed_chunk off: vLLM always runs prefill chunks beside decode requests")
    if pd_role:
        cfg = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
        c.flag("--kv-transfer-config", json.dumps(cfg))
        c.note(f"{pd_role} pool of a PD pair: a proxy routes prefill then decode")
    if d.nodes > 1:
        c.flag("--data-parallel-size-local", d.attn_dp // d.nodes)
        c.flag("--data-parallel-address", HEAD)
        c.flag("--data-parallel-rpc-port", 13345)
        c.note(f"head node shown; node i of {d.nodes} adds --data-parallel-start-rank "
               f"{d.attn_dp // d.nodes}*i and runs headless")  # fmt: skip
    if d.replicas > 1:
        c.note(f"{d.replicas} such units behind one load balancer")
    return c.text()


def _weights_note(c: _Cmd, d: Deployment) -> None:
    if d.weight_dtype == "fp4":
        c.note("FP4 weights: serve an FP4-quantized checkpoint of the model")


def launch_commands(
    model: str, dep: Deployment | PdDeployment, gpu: GpuSpec, copies: int
) -> dict[str, list[str]]:
    """{'sglang': [...], 'vllm': [...]}: one command per pool (prefill first for PD)."""
    out: dict[str, list[str]] = {"sglang": [], "vllm": []}
    pools: list[tuple[str | None, Deployment]] = (
        [("prefill", dep.prefill), ("decode", dep.decode)]
        if isinstance(dep, PdDeployment)
        else [(None, dep)]
    )
    for role, pool in pools:
        unit = pool.model_copy(update={"replicas": pool.replicas * copies})
        out["sglang"].append(sglang_command(model, unit, gpu, role))
        out["vllm"].append(vllm_command(model, unit, role))
    return out
