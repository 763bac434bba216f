"""Op tables from published kernel measurements: InferSim CSVs and DeepEP's README figures.

Each table names its CSV (or README) as source. FLOPs and bytes are recomputed from the shapes
with the op types (`sim.cost.ops`, `sim.cost.attention_ops`); the CSVs' own `mfu` columns are
not used.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

from kernels_calib import published_figures as fig
from kernels_calib.grids import make_tables
from sim.cost.comm import BF16, FP8_DISPATCH_BYTES_PER_ELEM, distinct_hits
from sim.cost.ops import DEEPEP_GPUS_PER_NODE, DEEPEP_MAX_NODES
from sim.specs.model import MlaSpec
from sim.specs.profile import KeyValue, OpTable

INFERSIM = "alibaba/InferSim@f2293da bench_data/"


def _read(csv_dir: Path, rel: str) -> list[dict[str, str]]:
    with (csv_dir / rel).open(newline="") as fh:
        return list(csv.DictReader(fh))


def _f(row: dict[str, str], col: str) -> float:
    return float(row[col])


def mla_decode(csv_dir: Path, gpu: str, m: MlaSpec, notes: list[str]) -> list[OpTable]:
    rel = f"mla/decode/{gpu}/128-512-64.csv"
    groups: dict[tuple[str, str], list[tuple[tuple[float, ...], float]]] = defaultdict(list)
    for r in _read(csv_dir, rel):
        at = (_f(r, "batch_size"), _f(r, "kv_len"))
        groups[(r["dtype"], r["kv_dtype"])].append((at, _f(r, "latency_us")))
    tables = []
    for (dtype, kv_dtype), rows in groups.items():
        key: dict[str, KeyValue] = {"s_q": 1, "kv_dtype": kv_dtype, "heads": 128}
        tables += make_tables(
            op="mla_decode",
            key=key,
            axis_names=("batch", "kv_len"),
            rows=rows,
            dtype=dtype,
            impl="flash_mla",
            source=INFERSIM + rel,
            notes=notes,
            mla_spec=m,
        )
    return tables


def mla_verify(m: MlaSpec, notes: list[str]) -> list[OpTable]:
    """FlashMLA at two query tokens per request (an MTP verify), measured on an H100 SXM5: the
    kernel and the SMs, clocks and HBM are H800 SXM5's (`published_figures.FLASHMLA_H100_RUN`)."""
    rows = [
        ((float(fig.FLASHMLA_H100_VERIFY_BATCH), float(kv)), us)
        for kv, us in fig.FLASHMLA_H100_VERIFY_US.items()
    ]
    notes.append(
        "mla_decode s_q 2: FlashMLA's own test on an H100 SXM5 (H800 SXM5's SMs, clocks and "
        "HBM; it differs in NVLink only), the split-KV kernel alone; not used for the roofline "
        "factors, which come from kernels measured on the profile's own GPU"
    )
    return make_tables(
        op="mla_decode",
        key={"s_q": 2, "kv_dtype": "bf16", "heads": 128},
        axis_names=("batch", "kv_len"),
        rows=rows,
        dtype="bf16",
        impl="flash_mla",
        source=fig.FLASHMLA_H100_RUN,
        notes=notes,
        mla_spec=m,
    )


def mla_prefill(csv_dir: Path, gpu: str, m: MlaSpec, notes: list[str]) -> list[OpTable]:
    rel = f"mla/prefill/{gpu}/128-128-64.csv"
    rows = [((_f(r, "seq_len"),), _f(r, "latency_us")) for r in _read(csv_dir, rel)]
    return make_tables(
        op="mla_prefill",
        key={"heads": 128, "prefix_len": 0},
        axis_names=("seq_len",),
        rows=rows,
        dtype="bf16",
        impl="flash_attn_3",
        source=INFERSIM + rel,
        notes=notes,
        mla_spec=m,
    )


def gemm(csv_dir: Path, gpu: str, notes: list[str]) -> list[OpTable]:
    rel = f"gemm/{gpu}/data.csv"
    groups: dict[tuple[int, int], list[tuple[tuple[float, ...], float]]] = defaultdict(list)
    for r in _read(csv_dir, rel):
        groups[(int(r["k"]), int(r["n"]))].append(((_f(r, "m"),), _f(r, "latency_us")))
    tables = []
    for (k, n), rows in sorted(groups.items()):
        tables += make_tables(
            op="gemm",
            key={"k": k, "n": n},
            axis_names=("m",),
            rows=rows,
            dtype="fp8",
            impl="deep_gemm",
            source=INFERSIM + rel,
            notes=notes,
        )
    return tables


def grouped_gemm(csv_dir: Path, gpu: str, phase: str, notes: list[str]) -> list[OpTable]:
    """moe_up / moe_down tables; tokens per expert recomputed exactly (the CSV rounds it)."""
    rel = f"grouped_gemm/{phase}/{gpu}/data.csv"
    layout = "masked" if phase == "decode" else "contiguous"
    tokens_col = "batch_size_per_gpu" if phase == "decode" else "seq_len_per_gpu"
    groups: dict[tuple[str, tuple[int, int, int]], list[tuple[tuple[float, ...], float]]]
    groups = defaultdict(list)
    for r in _read(csv_dir, rel):
        tpe = _f(r, tokens_col) * _f(r, "num_gpus") * _f(r, "topk") / _f(r, "num_experts")
        shape = (int(r["num_local_experts"]), int(r["hidden_size"]), int(r["intermediate_size"]))
        groups[("moe_up", shape)].append(((tpe,), _f(r, "up_proj_us")))
        groups[("moe_down", shape)].append(((tpe,), _f(r, "down_proj_us")))
    tables = []
    for (op, (experts, hidden, inter)), rows in sorted(groups.items()):
        key: dict[str, KeyValue] = {
            "num_local_experts": experts,
            "hidden": hidden,
            "intermediate": inter,
            "layout": layout,
        }
        tables += make_tables(
            op=op,
            key=key,
            axis_names=("tokens_per_expert",),
            rows=rows,
            dtype="fp8",
            impl="deep_gemm",
            source=INFERSIM + rel,
            notes=notes,
        )
    notes.append(
        f"{INFERSIM}{rel}: tokens_per_expert = tokens x num_gpus x topk / num_experts, exact "
        "(the CSV column is rounded)"
    )
    return tables


def dsa(csv_dir: Path, m: MlaSpec, notes: list[str]) -> list[OpTable]:
    """H800 DSA tables: sparse attention (FP8 KV decode, BF16 prefill) and indexer logits."""
    tables = []
    rows: list[tuple[tuple[float, ...], float]]
    rel = "dsa/decode/h800/attn-128-576-2048.csv"
    rows = [
        ((_f(r, "batch_size"), _f(r, "kv_len")), _f(r, "latency_us")) for r in _read(csv_dir, rel)
    ]
    key: dict[str, KeyValue] = {"s_q": 1, "kv_dtype": "fp8", "topk": 2048, "heads": 128}
    tables += make_tables(
        op="dsa_attn_decode",
        key=key,
        axis_names=("batch", "kv_len"),
        rows=rows,
        dtype="bf16",
        impl="flash_mla_sparse",
        source=INFERSIM + rel,
        notes=notes,
        mla_spec=m,
    )
    rel = "dsa/prefill/h800/attn-128-576-2048.csv"
    rows = [((_f(r, "s_q"), _f(r, "s_kv")), _f(r, "latency_us")) for r in _read(csv_dir, rel)]
    tables += make_tables(
        op="dsa_attn_prefill",
        key={"topk": 2048, "heads": 128},
        axis_names=("s_q", "s_kv"),
        rows=rows,
        dtype="bf16",
        impl="flash_mla_sparse",
        source=INFERSIM + rel,
        notes=notes,
        mla_spec=m,
    )
    index: dict[str, KeyValue] = {"index_heads": 64, "index_dim": 128}
    rel = "dsa/decode/h800/logits-64-128.csv"
    by_next: dict[int, list[tuple[tuple[float, ...], float]]] = defaultdict(list)
    for r in _read(csv_dir, rel):
        at = (_f(r, "batchsize"), _f(r, "s_kv"))
        by_next[int(r["next_n"])].append((at, _f(r, "latency_us")))
    for next_n, rows in sorted(by_next.items()):
        tables += make_tables(
            op="dsa_indexer_decode",
            key={**index, "next_n": next_n},
            axis_names=("batch", "s_kv"),
            rows=rows,
            dtype="fp8",
            impl="fp8_mqa_logits",
            source=INFERSIM + rel,
            notes=notes,
        )
    rel = "dsa/prefill/h800/logits-64-128.csv"
    rows = [((_f(r, "s_q"), _f(r, "s_kv")), _f(r, "latency_us")) for r in _read(csv_dir, rel)]
    tables += make_tables(
        op="dsa_indexer_prefill",
        key=index,
        axis_names=("s_q", "s_kv"),
        rows=rows,
        dtype="fp8",
        impl="fp8_mqa_logits",
        source=INFERSIM + rel,
        notes=notes,
    )
    notes.append(
        "dsa_indexer_* tables time the FP8 indexer logits kernel only; top-k selection is not "
        "included in the published figures"
    )
    return tables


def _deepep_normal_copies(ep: int) -> float:
    """Copies per token behind DeepEP's published normal-kernel bandwidths, as its tests count
    them: inside a node, tokens each rank receives (from itself too); across nodes, (token,
    node) pairs after de-duplication, the sender's own node included, with the token's experts
    in min(nodes, 4) node groups. Uniform random routing (`comm.distinct_hits`); the layout is
    `ops.EpDispatch`'s DeepEP benchmark one."""
    if ep <= DEEPEP_GPUS_PER_NODE:
        return distinct_hits(ep, fig.DEEPEP_TOPK)
    return distinct_hits(min(ep // DEEPEP_GPUS_PER_NODE, DEEPEP_MAX_NODES), fig.DEEPEP_TOPK)


def deepep(notes: list[str]) -> list[OpTable]:
    """ep_dispatch / ep_combine from DeepEP's H800 figures: EP8 over NVLink, larger EP over RDMA.

    Low-latency latencies are as published. Normal-kernel latencies are the bytes behind each
    published bandwidth divided by it (`_deepep_normal_copies`).
    """
    base: dict[str, KeyValue] = {"hidden": fig.DEEPEP_HIDDEN, "topk": fig.DEEPEP_TOPK}
    tables = []
    for op, column in (("ep_dispatch", 0), ("ep_combine", 1)):
        low = {ep: row[2 * column] for ep, row in fig.DEEPEP_LOW_LATENCY.items()}
        normal = {}
        for ep, bandwidths in fig.DEEPEP_NORMAL.items():
            per_value = FP8_DISPATCH_BYTES_PER_ELEM if op == "ep_dispatch" else BF16
            tokens = fig.DEEPEP_NORMAL_TOKENS_PER_RANK
            nbytes = tokens * _deepep_normal_copies(ep) * fig.DEEPEP_HIDDEN * per_value
            normal[ep] = nbytes / (bandwidths[column] * 1e9) * 1e6
        for mode, tokens, lat in (
            ("low_latency", fig.DEEPEP_LL_TOKENS_PER_RANK, low),
            ("normal", fig.DEEPEP_NORMAL_TOKENS_PER_RANK, normal),
        ):
            nv = [((float(tokens),), us) for ep, us in lat.items() if ep == 8]
            tables += make_tables(
                op=op,
                key={**base, "mode": mode, "link": "nvlink", "ep": 8},
                axis_names=("tokens_per_rank",),
                rows=nv,
                dtype="bf16",
                impl="deep_ep",
                source=fig.DEEPEP,
                notes=notes,
                link_bytes_per_s=fig.H800_NVLINK_BYTES_PER_S,
            )
            ib = [((float(ep), float(tokens)), us) for ep, us in lat.items() if ep > 8]
            tables += make_tables(
                op=op,
                key={**base, "mode": mode, "link": "rdma"},
                axis_names=("ep", "tokens_per_rank"),
                rows=ib,
                dtype="bf16",
                impl="deep_ep",
                source=fig.DEEPEP,
                notes=notes,
                link_bytes_per_s=fig.H800_RDMA_BYTES_PER_S,
            )
    notes.append(
        "ep_* normal-mode latencies = bytes / DeepEP's published bandwidth, bytes counted as "
        "DeepEP's tests count them (per receiving rank inside a node; per (token, node) pair, the "
        "sender's node included, across nodes); low-latency ones are DeepEP's own"
    )
    return tables
