"""One measured row -> the scenario that reproduces its benchmark, or the reason it cannot.

Reading the fields as aiconfigurator writes them (docs/validation.md has the sources): an agg
worker has `tp_size x attention_dp_size` GPUs (pipeline stages aside), with attention split
`tp_size` ways inside each of `attention_dp_size` ranks and the MoE layers spread
`moe_tp_size x moe_ep_size` over the same GPUs; `batch_size` is the engine's most requests per
attention rank. A disagg row has `prefill_num_workers` prefill workers and `decode_num_workers`
decode workers, each laid out by its pool's fields. A row the simulator cannot express, or whose
layout cannot be read with confidence, gets a coverage reason instead of a guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sim.catalog.profiles import scenario_profile_name
from sim.specs.deployment import Deployment, PdDeployment
from sim.specs.scenario import Scenario
from sim.validate.rows import MeasuredRow, Pool
from sim.validate.workload import AIPERF_COUNTS, BenchCounts, row_workload

GPUS_PER_NODE = 8  # every Hopper and B200 system in the sample is an 8-GPU HGX node

# model_path -> catalog model. DeepSeek-R1 is DeepSeek-V3's architecture (same config.json
# fields); Kimi-K2.5's text model has Kimi-K2's config (61 layers, 64 heads, 384 experts, top-8;
# checked against the configs aiconfigurator-core ships) beside a vision tower the text-only
# benchmark does not run.
MODELS = {
    "deepseek-ai/DeepSeek-R1": "deepseek-v3",
    "deepseek-ai/DeepSeek-V3": "deepseek-v3",
    "moonshotai/Kimi-K2.5": "kimi-k2",
}
SYSTEMS = {"h100_sxm": "h100", "h200_sxm": "h200", "b200_sxm": "b200"}
ENGINES = ("sglang", "trtllm", "vllm")
FP8_MODES = ("fp8", "fp8_block")

# coverage reasons (the report counts rows by these)
DUPLICATE = "duplicate measurement"
MALFORMED = "malformed row"
UNKNOWN_MODEL = "model not in the catalog"
UNKNOWN_SYSTEM = "GPU system not in the catalog"
UNKNOWN_ENGINE = "unknown backend"
PRECISION = "precision the catalog lacks"
PIPELINE = "pipeline parallelism"
LAYOUT = "layout not expressible"
AMBIGUOUS = "layout not readable with confidence"
NO_WORKERS = "disagg worker counts missing"
NO_FIT = "does not fit the GPUs"


@dataclass(frozen=True)
class Mapped:
    """A row the simulator can run: its scenario, GPU count and the layout that names it."""

    row: MeasuredRow
    scenario: Scenario
    gpus: int
    layout: str
    profile: str


@dataclass(frozen=True)
class Uncovered:
    """A row the simulator does not run, and why (`reason` is one of the constants above)."""

    row_id: str
    reason: str
    detail: str


class _NotCovered(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def duplicates(rows: Sequence[MeasuredRow], runnable: set[str] | None = None) -> dict[str, str]:
    """Row id -> the id of the row it repeats: the same experiment with the same measured TTFT
    and TPOT (the sample stores some measurements under several ids, layout encodings and model
    names: DeepSeek-V3 and R1 label the same run). The kept row is the first one in `runnable`
    (ids the simulator can express), else the first in the file."""
    groups: dict[tuple[Any, ...], list[str]] = {}
    for r in rows:
        key = (
            MODELS.get(r.model_path, r.model_path),
            r.system,
            r.backend,
            r.mode,
            r.isl,
            r.osl,
            r.concurrency,
            r.ttft_ms,
            r.tpot_ms,
        )
        groups.setdefault(key, []).append(r.id)
    out: dict[str, str] = {}
    for ids in groups.values():
        keep = next((i for i in ids if runnable is not None and i in runnable), ids[0])
        out.update({i: keep for i in ids if i != keep})
    return out


def _weights(row: MeasuredRow) -> str:
    modes = {row.precision, row.gemm_quant_mode, row.moe_quant_mode}
    if modes <= {*FP8_MODES}:
        return "fp8"
    raise _NotCovered(
        PRECISION,
        f"precision {row.precision} (gemm {row.gemm_quant_mode}, "
        f"moe {row.moe_quant_mode}): the simulator prices FP8 weights on Hopper",
    )


def _unit(pool: Pool, where: str, common: dict[str, Any], name: str) -> Deployment:
    """One worker's Deployment from its layout fields."""
    tp, adp = pool.tp_size or 1, pool.attention_dp_size or 1
    if (pool.pp_size or 1) > 1:
        raise _NotCovered(PIPELINE, f"{where}pp_size={pool.pp_size}")
    gpus = tp * adp
    moe_tp, moe_ep = pool.moe_tp_size, pool.moe_ep_size
    if moe_tp is None and moe_ep is None:
        raise _NotCovered(LAYOUT, f"{where}moe_tp_size and moe_ep_size are both empty")
    moe_tp = moe_tp or gpus // (moe_ep or 1)
    moe_ep = moe_ep or gpus // moe_tp
    if moe_tp > 1 and moe_ep > 1:
        raise _NotCovered(
            AMBIGUOUS,
            f"{where}tp={tp} x attention_dp={adp} with MoE TP{moe_tp} "
            f"x EP{moe_ep}: a {gpus}-GPU encoding whose Hopper rows repeat or "
            "nearly repeat the figures of 8-GPU rows, so the GPUs it ran on are "
            "not known",
        )
    if moe_tp * moe_ep != gpus:
        raise _NotCovered(
            LAYOUT, f"{where}moe_tp x moe_ep = {moe_tp * moe_ep} != tp x attention_dp = {gpus}"
        )
    if tp > GPUS_PER_NODE:
        raise _NotCovered(LAYOUT, f"{where}tp_size={tp}: attention TP across nodes")
    if gpus > GPUS_PER_NODE and gpus % GPUS_PER_NODE:
        raise _NotCovered(LAYOUT, f"{where}{gpus} GPUs do not fill whole {GPUS_PER_NODE}-GPU nodes")
    nodes = max(1, gpus // GPUS_PER_NODE)
    spec: dict[str, Any] = dict(
        name=name,
        nodes=nodes,
        gpus_per_node=gpus // nodes,
        attn_tp=tp,
        moe_tp=moe_tp,
        moe_ep=moe_ep,
        replicas=pool.num_workers or 1,
        **common,
    )
    if pool.batch_size:
        spec["max_running_requests"] = pool.batch_size
    try:
        return Deployment.model_validate(spec)
    except ValueError as exc:
        raise _NotCovered(LAYOUT, f"{where}{exc}") from None


def _deployment(row: MeasuredRow, weights: str) -> Deployment | PdDeployment:
    # KV dtype as each engine's own DeepSeek-R1 deployment recipe sets it (the rows do not
    # record it): TensorRT-LLM's set kv_cache_config.dtype fp8 for the FP8 checkpoint
    # (NVIDIA/TensorRT-LLM examples/serve/deepseek_r1_reasoning_parser.sh, TP8/EP8 on
    # deepseek-ai/DeepSeek-R1; its DeepSeek-R1 best-performance guide); SGLang's launch for
    # 8 x H200 sets no --kv-cache-dtype (sgl-project/sglang docs/basic_usage/deepseek_v3.md),
    # so `auto`, BF16, as vLLM's default
    kv = "fp8" if row.backend == "trtllm" and weights == "fp8" else "bf16"
    common: dict[str, Any] = dict(engine=row.backend, weight_dtype=weights, kv_dtype=kv)
    if row.backend == "vllm":
        common["mla_policy"] = "vllm"
    if row.mode == "agg":
        return _unit(row.agg, "", common, "agg")
    if row.mode != "disagg":
        raise _NotCovered(LAYOUT, f"mode={row.mode!r}: agg or disagg")
    if row.prefill.num_workers is None or row.decode.num_workers is None:
        raise _NotCovered(
            NO_WORKERS,
            "prefill_num_workers / decode_num_workers empty "
            "(aiconfigurator's own estimator refuses these rows too)",
        )
    return PdDeployment(
        name="pd",
        prefill=_unit(row.prefill, "prefill_", common, "prefill"),
        decode=_unit(row.decode, "decode_", common, "decode"),
    )


def _total_gpus(dep: Deployment | PdDeployment) -> int:
    return dep.total_gpus


def map_row(
    row: MeasuredRow, duplicate_of: str | None = None, counts: BenchCounts = AIPERF_COUNTS
) -> Mapped | Uncovered:
    """The scenario of one measured row (its benchmark run with `counts`), or why it has none."""
    try:
        if duplicate_of is not None:
            raise _NotCovered(DUPLICATE, f"same experiment and figures as {duplicate_of}")
        if row.model_path not in MODELS:
            raise _NotCovered(UNKNOWN_MODEL, row.model_path)
        if row.system not in SYSTEMS:
            raise _NotCovered(UNKNOWN_SYSTEM, row.system)
        if row.backend not in ENGINES:
            raise _NotCovered(UNKNOWN_ENGINE, f"{row.backend!r} (known: {', '.join(ENGINES)})")
        dep = _deployment(row, _weights(row))
        gpu = SYSTEMS[row.system]
        workload, run = row_workload(row, counts)
        scenario = Scenario.model_validate(
            dict(
                name=row.id,
                model=MODELS[row.model_path],
                gpu=gpu,
                deployments=[dep],
                workload=workload,
                slo=dict(ttft_s=3600.0, tpot_s=3600.0),  # unused: validation compares latencies
                run=run,
            )
        )
    except _NotCovered as nc:
        return Uncovered(row.id, nc.reason, nc.detail)
    except ValueError as exc:  # the scenario validator refuses it (a model constraint)
        return Uncovered(row.id, LAYOUT, str(exc).splitlines()[0])
    profile = scenario_profile_name(scenario.profile, gpu, row.backend) or "datasheet"
    return Mapped(row, scenario, _total_gpus(dep), dep.layout, profile)
