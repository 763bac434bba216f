"""Calibration profiles: per-op kernel latencies that the cost model runs on.

A profile is one versioned JSON file (never a pickle). It holds op tables, each a full
rectilinear grid of measured (or published) latencies for one op at fixed exact-match attributes,
plus roofline efficiency factors for ops without a table and the measured absorb-vs-expand
crossover. Every number names its source.

Each op is described by a fixed set of attributes (`OP_ATTRIBUTES`). A table puts each attribute
either in `key` (exact match) or in `axes` (a grid it interpolates over); a query to the cost
model gives every attribute. FLOPs and HBM bytes of a point follow the op types of
`sim.cost.ops`, so the cost model's own counts reproduce the table's points exactly.
"""

from __future__ import annotations

import itertools
from types import MappingProxyType
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from sim.specs.base import Spec
from sim.specs.model import MlaSpec

# 2: the fused `moe` op, a table's `kernel_source`, a profile's `engine` and `provenance`.
# A version-1 file is a version-2 file without them, so both are read.
SCHEMA_VERSION = 2
SUPPORTED_SCHEMA_VERSIONS: tuple[int, ...] = (1, 2)

MLA_DECODE = "mla_decode"  # absorbed MLA attention core (latent space), s_q tokens per request
MLA_PREFILL = "mla_prefill"  # expanded causal attention core, q/k 192, v 128, after a prefix
MLA_PREFILL_CHUNKED = "mla_prefill_chunked"  # same, prefix expanded in chunks, merged by LSE
MLA_EXTEND_ABSORB = "mla_extend_absorb"  # absorb path of an extend: W_UK + latent core + W_UV
MLA_EXTEND_EXPAND = "mla_extend_expand"  # expand path of an extend: kv_b up-projection + core
GEMM = "gemm"  # dense projection GEMM [m, k] x [k, n]
BMM = "bmm"  # per-head batched GEMM (W_UK / W_UV absorbed into the query / output)
MOE_UP = "moe_up"  # grouped expert GEMM, gate+up
MOE_DOWN = "moe_down"  # grouped expert GEMM, down
MOE = "moe"  # one fused MoE layer's routed experts on the busiest EP GPU (no communication)
DSA_INDEXER_DECODE = "dsa_indexer_decode"  # DSA indexer scoring + top-k, decode
DSA_INDEXER_PREFILL = "dsa_indexer_prefill"  # DSA indexer scoring + top-k, prefill
DSA_ATTN_DECODE = "dsa_attn_decode"  # sparse absorbed attention over the top-k tokens, decode
DSA_ATTN_PREFILL = "dsa_attn_prefill"  # sparse absorbed attention over the top-k tokens, prefill
ELEMENTWISE = "elementwise"  # norms, RoPE, activations: memory-bound, roofline unless measured
EP_DISPATCH = "ep_dispatch"  # expert-parallel token dispatch (DeepEP)
EP_COMBINE = "ep_combine"  # expert-parallel combine (DeepEP)
ALL_REDUCE = "all_reduce"
ALL_GATHER = "all_gather"
ALL_TO_ALL = "all_to_all"

OP_ATTRIBUTES = MappingProxyType(
    {
        MLA_DECODE: ("batch", "kv_len", "s_q", "kv_dtype", "heads"),
        MLA_PREFILL: ("seq_len", "prefix_len", "heads"),
        MLA_PREFILL_CHUNKED: ("seq_len", "prefix_len", "heads", "chunk_tokens"),
        MLA_EXTEND_ABSORB: ("new_tokens", "prefix_len", "heads"),
        MLA_EXTEND_EXPAND: ("new_tokens", "prefix_len", "heads"),
        GEMM: ("m", "k", "n"),
        BMM: ("m", "k", "n", "batch"),
        MOE_UP: ("tokens_per_expert", "num_local_experts", "hidden", "intermediate", "layout"),
        MOE_DOWN: ("tokens_per_expert", "num_local_experts", "hidden", "intermediate", "layout"),
        # tokens: the EP group's tokens entering the layer; experts: routed experts of the
        # model; intermediate: the model's (moe_tp splits it); power_law_alpha: exponent of the
        # expert-load power law the tokens were routed by (0: balanced)
        MOE: (
            "tokens",
            "hidden",
            "intermediate",
            "topk",
            "experts",
            "moe_tp",
            "moe_ep",
            "power_law_alpha",
        ),
        DSA_INDEXER_DECODE: ("batch", "s_kv", "next_n", "index_heads", "index_dim"),
        DSA_INDEXER_PREFILL: ("s_q", "s_kv", "index_heads", "index_dim"),
        DSA_ATTN_DECODE: ("batch", "kv_len", "s_q", "kv_dtype", "topk", "heads"),
        DSA_ATTN_PREFILL: ("s_q", "s_kv", "topk", "heads"),
        ELEMENTWISE: ("tokens", "width"),
        EP_DISPATCH: ("tokens_per_rank", "ep", "mode", "link", "hidden", "topk"),
        EP_COMBINE: ("tokens_per_rank", "ep", "mode", "link", "hidden", "topk"),
        ALL_REDUCE: ("bytes", "gpus", "link"),
        ALL_GATHER: ("bytes", "gpus", "link"),
        ALL_TO_ALL: ("bytes", "gpus", "link"),
    }
)
OPS: tuple[str, ...] = tuple(OP_ATTRIBUTES)
COMM_OPS = frozenset({EP_DISPATCH, EP_COMBINE, ALL_REDUCE, ALL_GATHER, ALL_TO_ALL})
ATTENTION_OPS = frozenset(op for op in OPS if op.startswith(("mla_", "dsa_")))
MLA_SHAPED_OPS = ATTENTION_OPS - {DSA_INDEXER_DECODE, DSA_INDEXER_PREFILL}

KeyValue = bool | int | float | str


def check_op(op: str) -> None:
    """Raise ValueError for an op outside the vocabulary, listing the known ones."""
    if op not in OP_ATTRIBUTES:
        raise ValueError(f"unknown op {op!r}: known ops are {', '.join(OPS)}")


class DeviceInfo(Spec):
    """What the tables were measured on."""

    name: str = Field(description="Device name as the driver reports it, e.g. 'NVIDIA H200'.")
    gpu: str | None = Field(default=None, description="Catalog GPU the efficiencies refer to.")
    driver: str | None = Field(default=None, description="Driver version (None: not known).")
    torch_version: str | None = Field(default=None, description="torch version that ran it.")
    libraries: dict[str, str] = Field(
        default_factory=dict, description="Kernel library -> version."
    )


class ModelShape(Spec):
    """The MLA shape the attention tables were measured for (heads may differ by TP)."""

    model: str = Field(description="Model the shape was taken from, e.g. 'deepseek-v3'.")
    heads: int = Field(ge=1, description="Query heads of the model (tables record their own).")
    kv_lora_rank: int = Field(ge=1, description="Latent width d_c.")
    qk_rope_head_dim: int = Field(ge=0, description="Shared RoPE key width d_s.")
    qk_nope_head_dim: int = Field(ge=1, description="Per-head no-RoPE q/k width d_k.")
    v_head_dim: int = Field(ge=1, description="Per-head value width d_v.")
    hidden_size: int = Field(ge=1, description="Model width d_model.")

    def mla_spec(self) -> MlaSpec:
        dims = {"kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"}
        return MlaSpec(q_lora_rank=None, **self.model_dump(include=dims))


class OpPoint(Spec):
    """One grid point: its coordinates, latency spread, work and achieved rates.

    The achieved rates may be left out when building a point; they are then computed.
    """

    at: dict[str, float] = Field(description="Axis name -> grid value of this point.")
    latency_us_p50: float = Field(gt=0, description="Median latency, microseconds.")
    latency_us_p10: float | None = Field(default=None, gt=0, description="10th percentile, us.")
    latency_us_p90: float | None = Field(default=None, gt=0, description="90th percentile, us.")
    flops: float = Field(ge=0, description="FLOPs of the point (the sim.cost.ops convention).")
    hbm_bytes: float = Field(
        ge=0,
        description="HBM bytes (link bytes for comm ops) of the point, sim.cost.ops convention.",
    )
    achieved_tflop_s: float = Field(default=0.0, ge=0, description="flops / latency, TFLOP/s.")
    achieved_gb_s: float = Field(default=0.0, ge=0, description="hbm_bytes / latency, GB/s.")

    @model_validator(mode="before")
    @classmethod
    def _rates(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("latency_us_p50"):
            seconds = float(data["latency_us_p50"]) * 1e-6
            data = {"achieved_tflop_s": float(data.get("flops", 0)) / seconds * 1e-12, **data}
            data = {"achieved_gb_s": float(data.get("hbm_bytes", 0)) / seconds * 1e-9, **data}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> OpPoint:
        if self.flops <= 0 and self.hbm_bytes <= 0:
            raise ValueError(f"point {self.at}: flops and hbm_bytes are both 0; give the work")
        lo, hi = self.latency_us_p10, self.latency_us_p90
        if (lo is not None and lo > self.latency_us_p50 * (1 + 1e-9)) or (
            hi is not None and hi < self.latency_us_p50 * (1 - 1e-9)
        ):
            raise ValueError(f"point {self.at}: need latency_us_p10 <= p50 <= p90")
        for name, got, want in (
            ("achieved_tflop_s", self.achieved_tflop_s, self.flops / self.latency_us_p50 * 1e-6),
            ("achieved_gb_s", self.achieved_gb_s, self.hbm_bytes / self.latency_us_p50 * 1e-3),
        ):
            if abs(got - want) > 1e-6 * max(abs(want), 1e-12):
                raise ValueError(
                    f"point {self.at}: {name} {got} disagrees with work/latency {want}"
                )
        return self


class OpTable(Spec):
    """A full rectilinear grid of points for one op at fixed key attributes."""

    op: str = Field(description=f"One of: {', '.join(OPS)}.")
    key: dict[str, KeyValue] = Field(description="Exact-match attributes, e.g. {'s_q': 1}.")
    axes: dict[str, list[float]] = Field(
        description="Ordered axis name -> strictly increasing positive grid values."
    )
    points: list[OpPoint] = Field(description="One point per grid combination.")
    dtype: Literal["bf16", "fp8"] = Field(description="Compute dtype the latencies were taken at.")
    impl: str = Field(description="Implementation timed, e.g. 'flash_mla', 'torch_sdpa'.")
    source: str = Field(description="Where the points come from (file, README, 'measured').")
    link_bytes_per_s: float | None = Field(
        default=None, gt=0, description="Comm ops only: link bandwidth the points ran over, B/s."
    )
    kernel_source: str | None = Field(
        default=None,
        description="The source table's own kernel label (e.g. 'sglang_deepgemm_gemm_nt_f8f8bf16'"
        "), where it names one; None: `impl` says it.",
    )

    @model_validator(mode="after")
    def _full_grid(self) -> OpTable:
        check_op(self.op)
        want = set(OP_ATTRIBUTES[self.op])
        both = set(self.key) & set(self.axes)
        if both:
            raise ValueError(f"{self.op} table: {sorted(both)} in both key and axes; pick one")
        have = set(self.key) | set(self.axes)
        if have != want:
            raise ValueError(
                f"{self.op} table must describe exactly {sorted(want)} in key or axes; "
                f"missing {sorted(want - have)}, unknown {sorted(have - want)}"
            )
        if not self.axes:
            raise ValueError(f"{self.op} table needs at least one axis")
        for name, values in self.axes.items():
            if not values or any(v <= 0 for v in values) or values != sorted(set(values)):
                raise ValueError(
                    f"{self.op} table axis {name!r}: give strictly increasing positive values"
                )
        grid = set(itertools.product(*self.axes.values()))
        seen = [tuple(p.at.get(a, float("nan")) for a in self.axes) for p in self.points]
        if len(seen) != len(grid) or set(seen) != grid:
            raise ValueError(
                f"{self.op} table {self.key}: {len(self.points)} points do not cover the "
                f"{len(grid)}-point grid {dict((a, len(v)) for a, v in self.axes.items())} "
                "exactly once; split it into full grids"
            )
        if (self.op in COMM_OPS) != (self.link_bytes_per_s is not None):
            raise ValueError(f"{self.op} table: link_bytes_per_s is set for comm ops only")
        return self


class Factor(Spec):
    """One roofline factor with the measurement it comes from."""

    value: float = Field(ge=0, description="The factor.")
    source: str = Field(description="Which kernel measurement it was derived from.")


class RooflineFactors(Spec):
    """Efficiencies for ops without a table: t = max(F / (peak e_c), B / (bw e_m)) + launch."""

    gemm_compute_efficiency: Factor = Field(description="GEMM-like ops' fraction of peak FLOP/s.")
    attention_compute_efficiency: Factor = Field(
        description="Attention ops' (MLA, DSA; GQA and KDA cores, which have no table, too) "
        "fraction of peak FLOP/s."
    )
    memory_bandwidth_efficiency: Factor = Field(description="Fraction of HBM bandwidth reached.")
    launch_overhead_us: Factor = Field(description="Fixed cost added per kernel, microseconds.")
    comm_link_efficiency: Factor = Field(description="Fraction of link bandwidth reached.")
    sparse_decode_compute_efficiency: Factor | None = Field(
        default=None,
        description="Sparse (DSA) decode attention's fraction of peak FLOP/s: it gathers top-k "
        "latent rows per token and reaches well below dense attention. None: "
        "attention_compute_efficiency.",
    )

    @model_validator(mode="after")
    def _fractions(self) -> RooflineFactors:
        names = ("gemm_compute", "attention_compute", "memory_bandwidth", "comm_link")
        for name in (*names, "sparse_decode_compute"):
            factor = getattr(self, f"{name}_efficiency")
            if factor is not None and not 0 < factor.value <= 1:
                raise ValueError(
                    f"roofline.{name}_efficiency must be in (0, 1], got {factor.value}"
                )
        return self

    def compute_efficiency(self, op: str) -> Factor:
        """The fraction of peak FLOP/s an op without a table reaches."""
        if op == DSA_ATTN_DECODE and self.sparse_decode_compute_efficiency is not None:
            return self.sparse_decode_compute_efficiency
        if op in ATTENTION_OPS:
            return self.attention_compute_efficiency
        return self.gemm_compute_efficiency


class CrossoverPoint(Spec):
    """Absorb vs expand extend timings after one prefix; where expand becomes faster."""

    prefix_len_tokens: int = Field(ge=0, description="Cached tokens before the new ones.")
    new_tokens: list[int] = Field(description="New-token counts timed (increasing).")
    absorb_us: list[float] = Field(description="Absorb path latency per new-token count, us.")
    expand_us: list[float] = Field(description="Expand path latency per new-token count, us.")
    status: Literal["crossed", "absorb_faster", "expand_faster"] = Field(
        description="'crossed' inside the range, or which path was faster throughout."
    )
    crossover_new_tokens: float | None = Field(
        default=None, description="New tokens above which expand is faster ('crossed' only)."
    )

    @model_validator(mode="after")
    def _aligned(self) -> CrossoverPoint:
        if not len(self.new_tokens) == len(self.absorb_us) == len(self.expand_us):
            raise ValueError("crossover: new_tokens, absorb_us and expand_us differ in length")
        if (self.status == "crossed") != (self.crossover_new_tokens is not None):
            raise ValueError("crossover: crossover_new_tokens is set exactly when status 'crossed'")
        return self


class Profile(Spec):
    """A calibration profile: op tables, roofline factors, crossover, provenance."""

    schema_version: int = Field(description=f"Format version; this code reads {SCHEMA_VERSION}.")
    name: str = Field(description="Profile name, e.g. 'h800-published'.")
    kind: Literal["measured", "published", "roofline"] = Field(description="Provenance class.")
    description: str = Field(default="", description="One line on what the profile is.")
    device: DeviceInfo = Field(description="Device the tables come from.")
    model_shape: ModelShape | None = Field(
        default=None, description="MLA shape of the attention tables (None: no attention tables)."
    )
    tables: list[OpTable] = Field(default_factory=list, description="Op tables.")
    roofline: RooflineFactors = Field(description="Factors for ops without a table.")
    crossover: list[CrossoverPoint] = Field(
        default_factory=list, description="Measured absorb-vs-expand crossover per prefix."
    )
    notes: list[str] = Field(default_factory=list, description="Free-form remarks.")
    created_utc: str | None = Field(default=None, description="When it was written (ISO 8601).")
    engine: Literal["sglang", "vllm", "trtllm"] | None = Field(
        default=None,
        description="Serving engine whose kernels the tables time (None: no engine's own stack).",
    )
    engine_version: str | None = Field(default=None, description="That engine's version.")
    provenance: dict[str, str] = Field(
        default_factory=dict,
        description="Where the tables were converted from: package and version, system, and "
        "each op family's source folder.",
    )

    @field_validator("schema_version")
    @classmethod
    def _supported(cls, version: int) -> int:
        if version not in SUPPORTED_SCHEMA_VERSIONS:
            raise ValueError(unsupported_version_message(version))
        return version

    @model_validator(mode="after")
    def _coherent(self) -> Profile:
        if self.kind == "roofline" and self.tables:
            raise ValueError("a 'roofline' profile holds no tables; use kind 'measured'")
        if self.model_shape is None and any(t.op in MLA_SHAPED_OPS for t in self.tables):
            raise ValueError("attention tables need model_shape (the MLA shape they ran with)")
        return self


def unsupported_version_message(version: object) -> str:
    supported = ", ".join(str(v) for v in SUPPORTED_SCHEMA_VERSIONS)
    return (
        f"profile schema_version {version!r} is not supported: this mlasim reads schema "
        f"version(s) {supported}; regenerate the profile with `python -m kernels_calib` "
        "or use a matching mlasim"
    )
