"""aiconfigurator-core tables as profile OpTables, family by family.

What each source table means (read from ai-dynamo/aiconfigurator's `collector/`):

- gemm_perf: one [m, k] x [k, n] GEMM (torch linear, DeepGEMM FP8 block-scaled, ...), m the
  tokens. -> `gemm`, one table per k (axes m, n).
- generation_mla_perf: one layer's absorbed MLA decode core (no projections) for batch_size
  requests of one new token after `step` cached tokens (kv length isl + step), num_heads the
  heads on one GPU (model heads / tp_size). -> `mla_decode` (s_q 1).
- context_mla_perf: one layer's prefill attention core of batch_size prompts of isl tokens, no
  prefix, heads per GPU. TensorRT-LLM, and SGLang's trtllm_mla backend on Blackwell, run it
  expanded (q/k 192, v 128): -> `mla_prefill` (batch 1 rows). SGLang's Hopper collector runs
  its FA3 kernel in latent space (576/512 per head), a path SGLang does not take for a fresh
  prefill: not converted.
- mla_bmm_perf: the absorbed decode's per-head BMMs, mla_gen_pre = q_nope x W_UK (128 -> 512),
  mla_gen_post = latent out x W_UV (512 -> 128), num_tokens rows, num_heads heads. -> `bmm`.
- moe_perf: one MoE layer's routed experts (routing, grouped GEMMs, activation; no dispatch),
  `num_tokens` tokens of the EP group routed top-k over num_experts, the experts split over
  moe_ep GPUs and their intermediate over moe_tp; with a skewed `distribution` the collector
  times the busiest rank (power_law_<alpha>). -> `moe`.
- custom_allreduce_perf (the engine's own all-reduce, CUDA-graph variant where both are timed)
  and nccl_perf (all_gather, alltoall): `message_size` BF16 elements of the whole tensor.
  -> `all_reduce`, `all_gather`, `all_to_all` over NVLink.

Latencies are AIC's mean over its timed runs, in ms; a point keeps it as latency_us_p50.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import product
from typing import Any

from sim.cost.attention_ops import op_at
from sim.cost.ops import elem_bytes
from sim.specs.model import MlaSpec
from sim.specs.profile import KeyValue, OpPoint, OpTable

# DeepSeek-class filter: what the catalog's models (DeepSeek-V3/R1/V3.2, Kimi K2) can query
GEMM_M = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
GEMM_MIN_NK = 256  # the models' smallest GEMM width is the 256-expert router
GEMM_SKIP_NK = (51200,)  # no catalog model has it; 65536 still brackets the widest (lm_head)
HEADS = (8, 16, 32, 64, 128)  # 128- or 64-head MLA over attention TP 1-8 (or 16 for 128 heads)
MOE_SHAPES = ((7168, 2048, 8, 256), (7168, 2048, 8, 384))  # hidden, inter, top-k, experts
DTYPES = {"bfloat16": "bf16", "fp8_block": "fp8"}  # FP8 per-tensor, NVFP4, INT4: not queried
KV_DTYPES = {"bfloat16": "bf16", "fp8": "fp8"}
BF16 = 2


def full_grid(
    cells: Mapping[Any, float], axes: tuple[str, ...], notes: list[str], what: str
) -> tuple[dict[str, list[float]], dict[tuple[float, ...], float]]:
    """The largest full grid in `cells` found by dropping, one at a time, the axis value that
    leaves most cells (a value missing the most combinations goes first)."""
    values = [sorted({c[i] for c in cells}) for i in range(len(axes))]
    dropped = 0
    while True:
        grid = list(product(*values))
        if all(g in cells for g in grid):
            break
        best: tuple[int, int, float] | None = None
        for i, vals in enumerate(values):
            if len(vals) == 1:
                continue
            for v in vals:
                rest = [vs if j != i else [x for x in vs if x != v] for j, vs in enumerate(values)]
                kept = sum(1 for g in product(*rest) if g in cells)
                if best is None or kept > best[0]:
                    best = (kept, i, v)
        if best is None:
            return {}, {}
        values[best[1]].remove(best[2])
        dropped += 1
    if dropped:
        notes.append(f"{what}: {dropped} axis value(s) dropped to leave a full grid")
    return dict(zip(axes, values, strict=True)), {g: cells[g] for g in grid}


def make_table(
    op: str,
    key: dict[str, KeyValue],
    axes: dict[str, list[float]],
    cells: Mapping[tuple[float, ...], float],
    *,
    dtype: str,
    kernel: str,
    source: str,
    mla: MlaSpec | None = None,
    link_bytes_per_s: float | None = None,
) -> OpTable:
    """An OpTable from grid cells (axis values -> latency, ms) with its op type's work per point."""
    points = []
    for coords, ms in sorted(cells.items()):
        at = dict(zip(axes, coords, strict=True))
        flops, nbytes = op_at(op, {**key, **at}).work(mla, elem_bytes(dtype))
        points.append(OpPoint(at=at, latency_us_p50=ms * 1000.0, flops=flops, hbm_bytes=nbytes))
    return OpTable(
        op=op,
        key=key,
        axes=axes,
        points=points,
        dtype=dtype,  # type: ignore[arg-type]
        impl=kernel,
        kernel_source=kernel,
        source=source,
        link_bytes_per_s=link_bytes_per_s,
    )


def _one_kernel(frame: Any, what: str, notes: list[str]) -> tuple[Any, str]:
    """Rows of the kernel source with the most rows (an engine's default lane is its widest
    sweep); the others are noted as not converted."""
    counts = frame.groupby("kernel_source").size().sort_values(ascending=False)
    kernel = str(counts.index[0])
    if len(counts) > 1:
        notes.append(f"{what}: kept {kernel}; not converted: {', '.join(counts.index[1:])}")
    return frame[frame.kernel_source == kernel], kernel


def gemm(frame: Any, source: str, notes: list[str]) -> list[OpTable]:
    tables = []
    for aic_dtype, dtype in DTYPES.items():
        rows = frame[frame.gemm_dtype == aic_dtype]
        if rows.empty:
            notes.append(f"gemm {aic_dtype}: not in the source; roofline prices it")
            continue
        rows, kernel = _one_kernel(rows, f"gemm {aic_dtype}", notes)
        rows = rows[rows.m.isin(GEMM_M) & (rows.n >= GEMM_MIN_NK) & (rows.k >= GEMM_MIN_NK)]
        rows = rows[~rows.n.isin(GEMM_SKIP_NK) & ~rows.k.isin(GEMM_SKIP_NK)]
        for k, by_k in rows.groupby("k"):
            cells = {(float(r.m), float(r.n)): float(r.latency) for r in by_k.itertuples()}
            axes, grid = full_grid(cells, ("m", "n"), notes, f"gemm {aic_dtype} k={k}")
            if grid:
                key: dict[str, KeyValue] = {"k": int(k)}
                tables.append(
                    make_table("gemm", key, axes, grid, dtype=dtype, kernel=kernel, source=source)
                )
    return tables


def mla_decode(frame: Any, source: str, mla: MlaSpec, notes: list[str]) -> list[OpTable]:
    """Absorbed decode per (kv dtype, heads) as a staircase of two full grids: every batch up to
    the shortest longest-context any batch reached, and the batches that reach the longest."""
    tables = []
    frame = frame[(frame.mla_dtype == "bfloat16") & frame.num_heads.isin(HEADS)]
    for (kv, heads), rows in frame.groupby(["kv_cache_dtype", "num_heads"]):
        if kv not in KV_DTYPES:
            continue
        rows, kernel = _one_kernel(rows, f"mla_decode kv {kv} heads {heads}", notes)
        cells = {
            (float(r.batch_size), float(r.isl + r.step)): float(r.latency)
            for r in rows.itertuples()
        }
        longest = {b: max(s for bb, s in cells if bb == b) for b, _ in cells}
        top, floor = max(longest.values()), min(longest.values())
        parts = [
            {c: t for c, t in cells.items() if c[1] <= floor},
            {c: t for c, t in cells.items() if longest[c[0]] == top},
        ]
        key: dict[str, KeyValue] = {"s_q": 1, "kv_dtype": KV_DTYPES[kv], "heads": int(heads)}
        for part in parts if floor < top else parts[:1]:
            what = f"mla_decode kv {kv} heads {heads}"
            axes, grid = full_grid(part, ("batch", "kv_len"), notes, what)
            if grid:
                tables.append(
                    make_table(
                        "mla_decode",
                        key,
                        axes,
                        grid,
                        dtype="bf16",
                        kernel=kernel,
                        source=source,
                        mla=mla,
                    )
                )
    return tables


def mla_prefill(frame: Any, source: str, mla: MlaSpec, notes: list[str]) -> list[OpTable]:
    """Expanded prefill core of one prompt (batch 1, BF16 cache) per heads, no prefix."""
    tables = []
    rows = frame[
        (frame.batch_size == 1)
        & (frame.kv_cache_dtype == "bfloat16")
        & (frame.mla_dtype == "bfloat16")
        & frame.num_heads.isin(HEADS)
    ]
    for heads, by_h in rows.groupby("num_heads"):
        by_h, kernel = _one_kernel(by_h, f"mla_prefill heads {heads}", notes)
        cells = {(float(r.isl),): float(r.latency) for r in by_h.itertuples()}
        axes, grid = full_grid(cells, ("seq_len",), notes, f"mla_prefill heads {heads}")
        key: dict[str, KeyValue] = {"prefix_len": 0, "heads": int(heads)}
        tables.append(
            make_table(
                "mla_prefill", key, axes, grid, dtype="bf16", kernel=kernel, source=source, mla=mla
            )
        )
    return tables


def mla_bmm(frame: Any, source: str, mla: MlaSpec, notes: list[str]) -> list[OpTable]:
    shapes = {
        "mla_gen_pre": (mla.qk_nope_head_dim, mla.kv_lora_rank),
        "mla_gen_post": (mla.kv_lora_rank, mla.v_head_dim),
    }
    tables = []
    rows = frame[frame.num_heads.isin(HEADS) & frame.bmm_dtype.isin([*DTYPES, "fp8"])]
    for (name, aic_dtype, heads), by in rows.groupby(["op_name", "bmm_dtype", "num_heads"]):
        if name not in shapes:
            continue
        dtype = "fp8" if aic_dtype.startswith("fp8") else "bf16"
        by, kernel = _one_kernel(by, f"bmm {name} {aic_dtype} heads {heads}", notes)
        cells = {(float(r.num_tokens),): float(r.latency) for r in by.itertuples()}
        axes, grid = full_grid(cells, ("m",), notes, f"bmm {name}")
        k, n = shapes[name]
        key: dict[str, KeyValue] = {"k": k, "n": n, "batch": int(heads)}
        tables.append(make_table("bmm", key, axes, grid, dtype=dtype, kernel=kernel, source=source))
    return tables


def power_law_alpha(distribution: str) -> float | None:
    """'balanced' -> 0.0, 'power_law_1.2' -> 1.2; None for a distribution not understood."""
    if distribution == "balanced":
        return 0.0
    head, _, alpha = distribution.rpartition("_")
    try:
        return float(alpha) if head == "power_law" else None
    except ValueError:
        return None


def moe(frame: Any, source: str, notes: list[str]) -> list[OpTable]:
    tables = []
    for hidden, inter, topk, experts in MOE_SHAPES:
        rows = frame[
            (frame.hidden_size == hidden)
            & (frame.inter_size == inter)
            & (frame.topk == topk)
            & (frame.num_experts == experts)
        ]
        for aic_dtype, dtype in DTYPES.items():
            by_dtype = rows[rows.moe_dtype == aic_dtype]
            if by_dtype.empty:
                continue
            by_dtype, kernel = _one_kernel(by_dtype, f"moe {experts}x{aic_dtype}", notes)
            # pure TP or pure EP, as the simulator's deployments split experts (mixed: not kept)
            pure = (by_dtype.moe_tp_size == 1) | (by_dtype.moe_ep_size == 1)
            groups = by_dtype[pure].groupby(["moe_tp_size", "moe_ep_size", "distribution"])
            for (tp, ep, dist), by in groups:
                alpha = power_law_alpha(str(dist))
                if alpha is None:
                    notes.append(f"moe: distribution {dist!r} not understood; not converted")
                    continue
                cells = {(float(r.num_tokens),): float(r.latency) for r in by.itertuples()}
                axes, grid = full_grid(cells, ("tokens",), notes, "moe")
                key: dict[str, KeyValue] = {
                    "hidden": hidden,
                    "intermediate": inter,
                    "topk": topk,
                    "experts": experts,
                    "moe_tp": int(tp),
                    "moe_ep": int(ep),
                    "power_law_alpha": alpha,
                }
                tables.append(
                    make_table("moe", key, axes, grid, dtype=dtype, kernel=kernel, source=source)
                )
    return tables


def collective(
    frame: Any,
    op: str,
    aic_ops: Iterable[str],
    source: str,
    link_bytes_per_s: float,
    notes: list[str],
) -> list[OpTable]:
    """One collective per GPU count over NVLink; `bytes` is the whole BF16 tensor."""
    rows = frame[frame.op_name.isin(list(aic_ops))]
    dtype_col = next(c for c in frame.columns if c.endswith("_dtype"))
    rows = rows[rows[dtype_col].isin(["bfloat16", "half", "float16"])]
    if "backend" in rows.columns and rows.kernel_source.str.endswith("_graph").any():
        rows = rows[rows.kernel_source.str.endswith("_graph")]  # serving replays CUDA graphs
    tables = []
    for gpus, by in rows.groupby("num_gpus"):
        by, kernel = _one_kernel(by, f"{op} {gpus} GPUs", notes)
        cells = {(float(r.message_size * BF16),): float(r.latency) for r in by.itertuples()}
        axes, grid = full_grid(cells, ("bytes",), notes, f"{op} {gpus} GPUs")
        key: dict[str, KeyValue] = {"gpus": int(gpus), "link": "nvlink"}
        tables.append(
            make_table(
                op,
                key,
                axes,
                grid,
                dtype="bf16",
                kernel=kernel,
                source=source,
                link_bytes_per_s=link_bytes_per_s,
            )
        )
    return tables


# DeepSeek-V3's MoE layer in DeepEP's benchmark layout (hidden, top-k, experts), the layout
# `EpDispatch.benchmark_copies` counts copies for; one node is 8 GPUs in the collector's runs
DEEPEP_SHAPE = (7168, 8, 256)
DEEPEP_GPUS_PER_NODE = 8
DEEPEP_LL_COLUMNS = {"ep_dispatch": "dispatch_avg_t_us", "ep_combine": "combine_avg_t_us"}
# the normal (prefill) kernels' SMs: DeepEP's README configures its inference-prefill example
# with Buffer.set_num_sms(24), the communication SMs the cost model leaves the GEMMs beside
DEEPEP_NORMAL_SMS = 24
DEEPEP_NORMAL_COLUMNS = {
    "ep_dispatch": ("dispatch_sms", "dispatch_notify_us", "dispatch_transmit_us"),
    "ep_combine": ("combine_sms", "combine_notify_us", "combine_transmit_us"),
}


def deepep(
    frame: Any,
    mode: str,
    source: str,
    nvlink_bytes_per_s: float,
    nic_bytes_per_s: float,
    notes: list[str],
) -> list[OpTable]:
    """DeepEP's dispatch and combine kernels as SGLang's collector runs DeepEP's own tests:
    `num_token` tokens per GPU, each sent to its top-k experts of `num_experts` spread over
    `node_num` x 8 GPUs, times in us. `mode` low_latency: wideep_deepep_ll_perf (each kernel's
    mean time); normal: wideep_deepep_normal_perf at `DEEPEP_NORMAL_SMS` SMs (its notify and
    transmit phases together). -> `ep_dispatch` and `ep_combine` of DeepSeek-V3's layer in that
    mode: one node over NVLink (EP8, axis tokens_per_rank), several over RDMA (axes ep and
    tokens_per_rank)."""
    hidden, topk, experts = DEEPEP_SHAPE
    rows = frame[
        (frame.hidden_size == hidden) & (frame.num_topk == topk) & (frame.num_experts == experts)
    ]
    if rows.empty:
        notes.append(f"ep_dispatch, ep_combine: {source} holds no {hidden}-wide top-{topk} rows")
        return []
    rows, kernel = _one_kernel(rows, f"deepep {mode}", notes)
    tables = []
    for op in DEEPEP_LL_COLUMNS:
        if mode == "low_latency":
            mine, times = rows, rows[DEEPEP_LL_COLUMNS[op]]
        else:
            sms, notify, transmit = DEEPEP_NORMAL_COLUMNS[op]
            mine = rows[rows[sms] == DEEPEP_NORMAL_SMS]
            times = mine[notify] + mine[transmit]
        for link, one in (("nvlink", mine.node_num == 1), ("rdma", mine.node_num > 1)):
            by, us_of = mine[one], times[one]
            if by.empty:
                continue
            ep = by.node_num * DEEPEP_GPUS_PER_NODE
            cells = {
                (float(e), float(n)): float(us) / 1000.0
                for e, n, us in zip(ep, by.num_token, us_of, strict=True)
            }
            what = f"{op} {mode} over {link}"
            axes, grid = full_grid(cells, ("ep", "tokens_per_rank"), notes, what)
            if not grid:
                continue
            key: dict[str, KeyValue] = {
                "hidden": hidden, "topk": topk, "mode": mode, "link": link,
            }  # fmt: skip
            if len(axes["ep"]) == 1:  # one EP size: a key, as DeepEP's own tables keep it
                key["ep"] = int(axes.pop("ep")[0])
                grid = {coords[1:]: ms for coords, ms in grid.items()}
            speed = nvlink_bytes_per_s if link == "nvlink" else nic_bytes_per_s
            tables.append(
                make_table(
                    op, key, axes, grid, dtype="bf16", kernel=kernel, source=source,
                    link_bytes_per_s=speed,
                )
            )  # fmt: skip
    return tables
