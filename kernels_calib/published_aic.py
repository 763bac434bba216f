"""Production-kernel profiles converted from aiconfigurator-core's per-op silicon tables.

    python -m kernels_calib.published aic --system h200_sxm --engine sglang [--version V]
        [--out P]
    python -m kernels_calib.published aic --bundled [--out DIR]

Each op family comes from `<system>/<family>/<engine>/<version>/` of the installed package
(`kernels_calib.aic_source`); the family's version is `--version` (default: the version the
gemm table was taken from) where that folder holds the table, else the newest one that does;
the collectives come from `comm/nccl/<newest>`. `kernels_calib.aic_tables` says what each
table means and which rows are kept (the catalog's DeepSeek-class models). Families with no
table for the engine are priced by the roofline factors of the GPU's bundled `<gpu>-roofline`
profile, and the profile's notes say which.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kernels_calib import aic_source as src
from kernels_calib import aic_tables as at
from kernels_calib.writer import model_shape, write_profile
from sim.catalog import load_gpu
from sim.catalog.profiles import load_profile
from sim.cost.comm import group_link
from sim.specs.profile import SCHEMA_VERSION, DeviceInfo, OpTable, Profile

SHAPE_MODEL = "deepseek-v3"  # the collectors' MLA shape: latent 512, rope 64, q/k nope 128, v 128
BUNDLED = (
    ("h100_sxm", "sglang"),
    ("h200_sxm", "sglang"),
    ("h200_sxm", "trtllm"),
    ("h200_sxm", "vllm"),
    ("b200_sxm", "sglang"),
    ("b200_sxm", "trtllm"),
)
ENGINE_NAMES = {"sglang": "SGLang", "trtllm": "TensorRT-LLM", "vllm": "vLLM"}
# op family -> (engine folder's table name, columns the converter reads)
FAMILIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "gemm": ("gemm", "gemm_perf", ("kernel_source", "gemm_dtype", "m", "n", "k", "latency")),
    "mla_decode": (
        "mla",
        "generation_mla_perf",
        (
            "kernel_source",
            "mla_dtype",
            "kv_cache_dtype",
            "num_heads",
            "batch_size",
            "isl",
            "step",
            "latency",
        ),
    ),
    "mla_prefill": (
        "mla",
        "context_mla_perf",
        (
            "kernel_source",
            "mla_dtype",
            "kv_cache_dtype",
            "num_heads",
            "batch_size",
            "isl",
            "latency",
        ),
    ),
    "bmm": (
        "mla_bmm",
        "mla_bmm_perf",
        ("op_name", "kernel_source", "bmm_dtype", "num_tokens", "num_heads", "latency"),
    ),
    "moe": (
        "moe",
        "moe_perf",
        (
            "kernel_source",
            "moe_dtype",
            "num_tokens",
            "hidden_size",
            "inter_size",
            "topk",
            "num_experts",
            "moe_tp_size",
            "moe_ep_size",
            "distribution",
            "latency",
        ),
    ),
    "all_reduce": (
        "comm",
        "custom_allreduce_perf",
        ("op_name", "kernel_source", "num_gpus", "message_size", "latency"),
    ),
}
COLLECTIVE_COLUMNS = (
    "op_name",
    "kernel_source",
    "nccl_dtype",
    "num_gpus",
    "message_size",
    "latency",
)
EXPANDED_PREFILL_KERNELS = ("default", "trtllm_mla")  # context tables in q/k 192, v 128 form


def _pick(
    s: src.Source, system: str, family: str, engine: str, table: str, version: str | None
) -> tuple[Path, str] | None:
    """The folder and version a family is converted from (None: the engine has no table)."""
    have = [
        v
        for v in s.versions(system, family, engine)
        if (s.folder(system, family, engine, v) / f"{table}.parquet").is_file()
    ]
    if version in have:
        return s.folder(system, family, engine, version), str(version)
    return (s.folder(system, family, engine, have[-1]), have[-1]) if have else None


def build(
    system: str, engine: str, version: str | None = None, s: src.Source | None = None
) -> Profile:
    """The profile of `engine` on `system`. Raises AicError for an unknown system or engine, or
    a table that is missing, unreadable or lacks a column."""
    s = s or src.installed()
    src.check_engine(engine)
    s.system_dir(system)
    gpu = load_gpu(src.SYSTEMS[system])
    mla = model_shape(SHAPE_MODEL).mla_spec()
    notes: list[str] = []
    tables: list[OpTable] = []
    provenance = {"package": f"{src.PACKAGE} {s.version}", "system": system}
    device = ""
    engine_version = version
    measured: list[str] = []
    for op, (family, table, columns) in FAMILIES.items():
        found = _pick(s, system, family, engine, table, engine_version)
        if found is None:
            notes.append(
                f"{op}: no {family}/{engine}/*/{table}.parquet for {system}; roofline prices it"
            )
            continue
        folder, used = found
        frame = src.read_table(folder, table, columns)
        where = f"{src.PACKAGE} {s.version}: {system}/{family}/{engine}/{used}/{table}.parquet"
        device = device or str(frame.device.iloc[0])
        engine_version = engine_version or used
        made = _convert(op, frame, where, mla, gpu, notes)
        if not made and op != "mla_prefill":
            notes.append(f"{op}: {where} holds no DeepSeek-class rows; roofline prices it")
        if made:
            tables += made
            measured.append(op)
            provenance[op] = where
    tables += _collectives(s, system, gpu, notes, provenance, measured)
    deepep = (
        _deepep(s, system, gpu, engine_version, notes, provenance) if engine == "sglang" else []
    )
    tables += deepep  # DeepEP is SGLang's expert-parallel exchange
    roofline = load_profile(f"{gpu.name}-roofline")
    unmeasured = {
        "mla_prefill_chunked",
        "mla_extend_absorb",
        "mla_extend_expand",
        "dsa_*",
        "elementwise",
    }
    modes = {t.key["mode"] for t in deepep}
    if not modes:
        unmeasured |= {"ep_dispatch", "ep_combine"}
    unmeasured |= {
        f"ep_dispatch and ep_combine in {m} mode" for m in DEEPEP_TABLES if modes and m not in modes
    }
    notes.append(
        f"roofline ({roofline.name}'s factors) prices: {', '.join(sorted(unmeasured))}; "
        "DSA sparse attention tables are module-level and not converted"
    )
    notes.append("latencies are aiconfigurator's mean over its timed runs, stored as p50")
    return Profile(
        schema_version=SCHEMA_VERSION,
        name=f"{gpu.name}-{engine}",
        kind="published",
        description=f"{gpu.display_name}: {ENGINE_NAMES[engine]} {engine_version} production "
        f"kernels, converted from {src.PACKAGE} {s.version}",
        device=DeviceInfo(
            name=device or gpu.display_name,
            gpu=gpu.name,
            libraries={engine: str(engine_version), src.PACKAGE: s.version},
        ),
        model_shape=model_shape(SHAPE_MODEL),
        tables=tables,
        roofline=roofline.roofline,
        notes=notes,
        engine=engine,  # type: ignore[arg-type]
        engine_version=engine_version,
        provenance=provenance,
    )


def _convert(
    op: str, frame: Any, where: str, mla: Any, gpu: Any, notes: list[str]
) -> list[OpTable]:
    if op == "mla_prefill":
        kernels = set(frame.kernel_source)
        if not kernels & set(EXPANDED_PREFILL_KERNELS):
            notes.append(
                f"mla_prefill: {where} times {sorted(kernels)} in latent (576/512) "
                "form, which SGLang does not run for a fresh prefill; roofline prices it"
            )
            return []
        frame = frame[frame.kernel_source.isin(EXPANDED_PREFILL_KERNELS)]
    link = group_link(gpu, 2, 8).bytes_per_s
    convert: dict[str, Callable[[], list[OpTable]]] = {
        "gemm": lambda: at.gemm(frame, where, notes),
        "mla_decode": lambda: at.mla_decode(frame, where, mla, notes),
        "mla_prefill": lambda: at.mla_prefill(frame, where, mla, notes),
        "bmm": lambda: at.mla_bmm(frame, where, mla, notes),
        "moe": lambda: at.moe(frame, where, notes),
        "all_reduce": lambda: at.collective(
            frame, "all_reduce", ["all_reduce"], where, link, notes
        ),
    }
    return convert[op]()


def _collectives(
    s: src.Source,
    system: str,
    gpu: Any,
    notes: list[str],
    provenance: dict[str, str],
    measured: list[str],
) -> list[OpTable]:
    """NCCL all-gather and all-to-all (NCCL is shared by the engines: its newest version)."""
    versions = [
        v
        for v in s.versions(system, "comm", "nccl")
        if (s.folder(system, "comm", "nccl", v) / "nccl_perf.parquet").is_file()
    ]
    if not versions:
        notes.append(f"all_gather, all_to_all: no comm/nccl table for {system}; roofline")
        return []
    folder = s.folder(system, "comm", "nccl", versions[-1])
    frame = src.read_table(folder, "nccl_perf", COLLECTIVE_COLUMNS)
    where = f"{src.PACKAGE} {s.version}: {system}/comm/nccl/{versions[-1]}/nccl_perf.parquet"
    link = group_link(gpu, 2, 8).bytes_per_s
    tables = []
    for op, aic in (("all_gather", "all_gather"), ("all_to_all", "alltoall")):
        made = at.collective(frame, op, [aic], where, link, notes)
        tables += made
        if made:
            measured.append(op)
            provenance[op] = where
    return tables


# DeepEP's tables in SGLang's collector, by mode: (table, the columns the converter reads)
DEEPEP_TABLES = {
    "low_latency": (
        "wideep_deepep_ll_perf",
        ("dispatch_avg_t_us", "combine_avg_t_us"),
        ("dispatch_avg_t_us", "combine_avg_t_us"),
    ),
    "normal": (
        "wideep_deepep_normal_perf",
        (
            "dispatch_sms", "dispatch_notify_us", "dispatch_transmit_us",
            "combine_sms", "combine_notify_us", "combine_transmit_us",
        ),
        ("dispatch_transmit_us", "combine_transmit_us"),
    ),
}  # fmt: skip
DEEPEP_COLUMNS = (
    "kernel_source",
    "node_num",
    "hidden_size",
    "num_token",
    "num_topk",
    "num_experts",
)


def _deepep(
    s: src.Source,
    system: str,
    gpu: Any,
    version: str | None,
    notes: list[str],
    provenance: dict[str, str],
) -> list[OpTable]:
    """DeepEP's dispatch and combine from SGLang's collector, low-latency (decode) and normal
    (prefill) kernels, one node (NVLink) and several (RDMA) apart: each from one version
    folder, `version` where it holds such rows, else the newest that does (the collector ran
    several nodes in fewer campaigns than one)."""
    tables: list[OpTable] = []
    wheres: list[str] = []
    nvlink, nic = gpu.nvlink_gb_s * 1e9, gpu.nic_gb_s * 1e9
    for mode, (name, columns, positive) in DEEPEP_TABLES.items():
        have = [
            v
            for v in s.versions(system, "comm", "sglang")
            if (s.folder(system, "comm", "sglang", v) / f"{name}.parquet").is_file()
        ]
        order = ([version] if version in have else []) + have[::-1]
        frames = {v: _deepep_rows(s, system, v, name, columns, positive) for v in have}
        made_mode: list[OpTable] = []
        for one_node in (True, False):  # one node (NVLink), several (RDMA)
            for used in order:
                frame = frames[used][(frames[used].node_num == 1) == one_node]
                where = f"{src.PACKAGE} {s.version}: {system}/comm/sglang/{used}/{name}.parquet"
                made = at.deepep(frame, mode, where, nvlink, nic, notes) if len(frame) else []
                if made:
                    made_mode += made
                    wheres.append(where)
                    break
        if not made_mode:
            notes.append(
                f"ep_dispatch, ep_combine ({mode}): no comm/sglang/*/{name} rows for {system}"
            )
            continue
        tables += made_mode
        links = sorted({str(t.key["link"]) for t in made_mode})
        notes.append(
            f"ep_dispatch, ep_combine ({mode}): DeepEP's kernels as SGLang's collector timed "
            f"them (DeepSeek-V3's 7,168-wide tokens, top-8 of 256 experts"
            + (f", {at.DEEPEP_NORMAL_SMS} SMs" if mode == "normal" else "")
            + f") over {' and '.join(links)}"
        )
    if tables:
        provenance["ep_dispatch"] = provenance["ep_combine"] = "; ".join(dict.fromkeys(wheres))
    return tables


def _deepep_rows(
    s: src.Source,
    system: str,
    version: str,
    name: str,
    columns: tuple[str, ...],
    positive: tuple[str, ...],
) -> Any:
    """One version's rows of a DeepEP table in DeepSeek-V3's shape (`aic_tables.DEEPEP_SHAPE`)."""
    hidden, topk, experts = at.DEEPEP_SHAPE
    f = src.read_table(
        s.folder(system, "comm", "sglang", version), name, DEEPEP_COLUMNS + columns, positive
    )
    return f[(f.hidden_size == hidden) & (f.num_topk == topk) & (f.num_experts == experts)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kernels_calib.published aic",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--system", choices=sorted(src.SYSTEMS))
    parser.add_argument("--engine", choices=src.ENGINES)
    parser.add_argument("--version", default=None, help="engine version folder (default newest)")
    parser.add_argument(
        "--bundled", action="store_true", help="build every bundled production-kernel profile"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="output file (one profile) or folder (--bundled)"
    )
    args = parser.parse_args(argv)
    repo_profiles = Path(__file__).resolve().parent.parent / "sim" / "catalog" / "profiles"
    if args.bundled:
        jobs = [(system, engine, None) for system, engine in BUNDLED]
    elif args.system and args.engine:
        jobs = [(args.system, args.engine, args.version)]
    else:
        parser.error("give --system and --engine, or --bundled")
    try:
        source = src.installed()
        for system, engine, version in jobs:
            profile = build(system, engine, version, source)
            out = args.out if args.out and not args.bundled else None
            path = out or (args.out or repo_profiles) / f"{profile.name}.json"
            write_profile(profile, path, compact=True)
            points = sum(len(t.points) for t in profile.tables)
            print(f"{path}: {len(profile.tables)} tables, {points} points")
    except src.AicError as exc:
        parser.exit(2, f"error: {exc}\n")
    return 0
