"""Scenario, deployment and measured-row builders shared by the tests in every directory.

`TINY` is the small scenario most run-level tests start from (one 8-GPU H200 node, seconds of
simulated time); `tiny(...)` replaces its top-level keys and `poisson(...)` writes a workload.
`decode_ranks` is a decode-only batch with given requests per rank. `unit` and `pd_pair`
build the one-node deployments the engine tests drive with a fixed cost model. `SHORT_TEXT`
and `SMALL_TEXT` are scenario files for tests that read YAML; `MEASURED_ROW` and
`write_rows_csv` make a measured-rows CSV for the validation tests. `bench_script` loads one
of `bench/`'s scripts (not a package) as a module for its tests. Import them as
`from tests.builders import ...` (pyproject puts the repository root on the path)."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from sim.cost.batch import BatchShape
from sim.specs.deployment import Deployment, PdDeployment
from sim.specs.scenario import Scenario
from sim.validate.rows import REQUIRED_COLUMNS


def decode_ranks(counts: list[int], kv: int) -> BatchShape:
    """A decode-only step: `counts[r]` requests on rank r, each with `kv` cached tokens."""
    rank = np.repeat(np.arange(len(counts)), counts)
    return BatchShape(
        num_ranks=len(counts),
        rank=rank,
        new_tokens=np.ones(rank.size, dtype=np.int64),
        kv_tokens=np.full(rank.size, kv),
        is_decode=np.ones(rank.size, dtype=bool),
    )


def poisson(rate_req_s: float, input_tokens: int, output_tokens: int) -> dict[str, Any]:
    """An open-loop Poisson workload with fixed input and output lengths."""
    return {
        "kind": "poisson",
        "rate_req_s": rate_req_s,
        "input": {"kind": "fixed", "tokens": input_tokens},
        "output": {"kind": "fixed", "tokens": output_tokens},
    }


TINY: dict[str, Any] = {
    "name": "tiny",
    "model": "deepseek-v3",
    "gpu": "h200",
    "deployments": [
        {"name": "tp8", "attn_tp": 8, "moe_tp": 8},
        {"name": "dp8_ep8", "attn_tp": 1, "moe_ep": 8},
    ],
    "workload": poisson(4.0, 1000, 50),
    "slo": {"ttft_s": 0.5, "tpot_s": 0.1, "percentile": 90},
    "run": {"duration_s": 8.0, "warmup_s": 1.0, "seed": 1},
}


def tiny(**changes: Any) -> Scenario:
    """TINY with top-level keys replaced (`workload=...`, `deployments=...`)."""
    return Scenario.model_validate(TINY | changes)


def unit(ranks: int = 1, **kw: object) -> Deployment:
    """A colocated unit of `ranks` one-GPU attention ranks (EP over all of them)."""
    return Deployment(name="u", nodes=1, gpus_per_node=ranks, attn_tp=1, moe_ep=ranks, **kw)


def pd_pair(
    prefill: dict[str, Any] | None = None, decode: dict[str, Any] | None = None, **both: Any
) -> PdDeployment:
    """A PD pair named `pd` of pools `p` and `d`; `both` goes to each pool, `prefill` and
    `decode` to one. Each pool takes its role from its place in the pair."""
    return PdDeployment(
        name="pd",
        prefill=Deployment(name="p", **both, **(prefill or {})),
        decode=Deployment(name="d", **both, **(decode or {})),
    )


# TINY's two layouts as a scenario file, with a looser SLO and a 6 s run: the CLI tests edit
# the text itself (`.replace`), so it stays YAML.
SHORT_TEXT = """\
name: short
model: deepseek-v3
gpu: h200
deployments:
  - {name: tp8, attn_tp: 8, moe_tp: 8}
  - {name: dp8_ep8, attn_tp: 1, moe_ep: 8}
workload:
  kind: poisson
  rate_req_s: 4
  input: {kind: fixed, tokens: 1000}
  output: {kind: fixed, tokens: 50}
slo: {ttft_s: 2, tpot_s: 0.1}
run: {duration_s: 6, warmup_s: 1, seed: 1}
"""

# Three small layouts (TP, DP with MTP, a PD pair) on two GPUs or fewer, with uniform lengths:
# the run-level tests that swap in a fixed cost model (`tests.engine.fixed_cost.small_factory`).
SMALL_TEXT = """\
name: small
model: deepseek-v3
gpu: h200
deployments:
  - {name: tp2, gpus_per_node: 2, attn_tp: 2, moe_tp: 2}
  - {name: dp2, gpus_per_node: 2, attn_tp: 1, moe_ep: 2, mtp_draft_tokens: 1, mtp_acceptance: [0.8]}
  - name: pd
    prefill: {name: p, gpus_per_node: 1}
    decode: {name: d, gpus_per_node: 1}
    kv_transfer_gb_s: 10
workload:
  kind: poisson
  rate_req_s: 20
  input: {kind: uniform, min_tokens: 100, max_tokens: 2000}
  output: {kind: uniform, min_tokens: 10, max_tokens: 200}
slo: {ttft_s: 0.5, tpot_s: 0.05, percentile: 90}
run: {duration_s: 20, warmup_s: 2, seed: 3}
"""


# One measured deployment row (aiconfigurator's silicon_sample.csv columns) for the validation
# tests; each test overrides the fields it is about.
MEASURED_ROW: dict[str, Any] = {
    "id": "r1",
    "silicon_data_source": "db-dump; config_id=1; silicon_concurrency=8; image",
    "backend": "trtllm",
    "backend_version": "1.1.0",
    "model_path": "deepseek-ai/DeepSeek-R1",
    "system": "h200_sxm",
    "precision": "fp8",
    "mode": "agg",
    "isl": 1024,
    "osl": 64,
    "gemm_quant_mode": "fp8",
    "moe_quant_mode": "fp8",
    "batch_size": 8,
    "tp_size": 8,
    "pp_size": 1,
    "attention_dp_size": 1,
    "moe_tp_size": 1,
    "moe_ep_size": 8,
    "silicon_ttft_ms": 400.0,
    "silicon_tpot_ms": 12.0,
}


def write_rows_csv(
    path: Path, rows: list[dict[str, Any]], columns: tuple[str, ...] = REQUIRED_COLUMNS
) -> Path:
    """`rows` as a measured-rows CSV with `columns` (missing fields left empty)."""
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c, "") for c in columns})
    return path


def bench_script(name: str) -> ModuleType:
    """`bench/<name>.py` loaded as the module `<name>_under_test` (registered in `sys.modules`,
    where dataclasses look their module up)."""
    path = Path(__file__).resolve().parents[1] / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
