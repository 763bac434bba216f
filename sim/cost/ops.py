"""One frozen type per op of the profile vocabulary: GEMMs, experts, elementwise, collectives.

Each type is named by its table op (`op`, from `sim.specs.profile`) and holds exactly that op's
attributes (`OP_ATTRIBUTES[op]`) as its compared fields: the op's table key and point, and its
memo key. `work(mla, elem_bytes)` counts its FLOPs and HBM (comm ops: link) bytes in the
convention the calibration tables use (`docs/cost-model.md`), so a table point priced as an op
comes back exactly; `elem_bytes` is the compute dtype's operand width (FP8: 1, BF16: 2). A field
that is not compared (`weight_excess`, an attention op's `segments`) changes the work a step's
op does, never the shape its table is read at. The attention ops, and every table op's type by
name, are `sim.cost.attention_ops`.
"""

from __future__ import annotations

import dataclasses
import functools
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from sim.cost.comm import ep_copies
from sim.specs import profile as p
from sim.specs.model import MlaSpec

BF16 = 2.0
FP8_SCALE_GROUP = 128  # values per fp32 scale in block-scaled FP8 layouts
# The layout of DeepEP's published benchmarks: 8 H800s per node (NVLink ~160 GB/s, one
# ~50 GB/s NIC each), a token's experts on at most 4 nodes.
DEEPEP_GPUS_PER_NODE, DEEPEP_MAX_NODES, DEEPEP_NVLINK_SPEEDUP = 8, 4, 160.0 / 50.0
Work = tuple[float, float]  # FLOPs, bytes


def elem_bytes(dtype: str) -> float:
    """Operand bytes of a compute dtype; ValueError unless 'bf16' or 'fp8'."""
    if dtype not in ("bf16", "fp8"):
        raise ValueError(f"unknown compute dtype {dtype!r}: use 'bf16' or 'fp8'")
    return 1.0 if dtype == "fp8" else BF16


@functools.cache
def _fields(cls: type[Op]) -> tuple[tuple[str, bool], ...]:
    """An op type's attributes (its compared fields) in order, each with whether it is text."""
    return tuple((f.name, f.type == "str") for f in dataclasses.fields(cls) if f.compare)


@dataclass(frozen=True)
class Op(ABC):
    """An op at one shape. Subclasses declare `op` and their attributes as fields."""

    op: ClassVar[str]

    @classmethod
    def of(cls, attrs: Mapping[str, object]) -> Op:
        """The op at `attrs` (each field: a number, or for string fields any value, as text).

        Raises ValueError naming the attribute that is not a number."""
        values: dict[str, object] = {}
        for name, text in _fields(cls):
            value = attrs[name]
            if text:
                values[name] = str(value)
            elif isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"attribute {name!r} must be a number, got {value!r}")
            else:
                values[name] = float(value)
        return cls(**values)

    def attributes(self) -> dict[str, object]:
        """The op's table attributes by name (its key and point together)."""
        return {name: getattr(self, name) for name, _ in _fields(type(self))}

    @abstractmethod
    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        """FLOPs and bytes of the op (`m`: the model's MLA shape, needed by attention ops)."""

    def _mla(self, m: MlaSpec | None) -> MlaSpec:
        if m is None:
            raise ValueError(f"{self.op} work needs the MLA shape: pass mla=")
        return m


@dataclass(frozen=True)
class Gemm(Op):
    """[m, k] x [k, n]; `weight_excess`: weight bytes per value beyond the compute dtype's (FP4's
    packing and scales against FP8), not a table attribute."""

    op: ClassVar[str] = p.GEMM
    m: float
    k: float
    n: float
    weight_excess: float = dataclasses.field(default=0.0, compare=False, kw_only=True)

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        a, k, n, e = self.m, self.k, self.n, elem_bytes
        return 2 * a * k * n, e * (a * k + k * n) + BF16 * a * n + k * n * self.weight_excess


@dataclass(frozen=True)
class Bmm(Op):
    op: ClassVar[str] = p.BMM
    m: float
    k: float
    n: float
    batch: float

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        a, k, n, e, groups = self.m, self.k, self.n, elem_bytes, self.batch
        return groups * 2 * a * k * n, groups * (e * (a * k + k * n) + BF16 * a * n)


@dataclass(frozen=True)
class MoeUp(Op):
    """Grouped expert GEMM, gate+up: every local expert's weights read once (`weight_excess`
    as `Gemm`'s)."""

    op: ClassVar[str] = p.MOE_UP
    tokens_per_expert: float
    num_local_experts: float
    hidden: float
    intermediate: float
    layout: str
    weight_excess: float = dataclasses.field(default=0.0, compare=False, kw_only=True)

    def shape(self) -> tuple[float, float]:
        return self.hidden, 2 * self.intermediate

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        experts, e = self.num_local_experts, elem_bytes
        tokens = experts * self.tokens_per_expert
        k, n = self.shape()
        nbytes = e * (experts * k * n + tokens * k) + BF16 * tokens * n
        return 2 * tokens * k * n, nbytes + experts * (k * n) * self.weight_excess


@dataclass(frozen=True)
class MoeDown(MoeUp):
    op: ClassVar[str] = p.MOE_DOWN

    def shape(self) -> tuple[float, float]:
        return self.intermediate, self.hidden


@dataclass(frozen=True)
class Moe(Op):
    """A fused MoE layer on one EP GPU: the balanced share of its token-expert pairs."""

    op: ClassVar[str] = p.MOE
    tokens: float
    hidden: float
    intermediate: float
    topk: float
    experts: float
    moe_tp: float
    moe_ep: float
    power_law_alpha: float  # the skew measured: in the table's latency only

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        pairs = self.tokens * self.topk / self.moe_ep
        inter, hidden, e = self.intermediate / self.moe_tp, self.hidden, elem_bytes
        weights = self.experts / self.moe_ep * 3 * hidden * inter
        return 6 * pairs * hidden * inter, e * (weights + pairs * hidden) + BF16 * pairs * hidden


@dataclass(frozen=True)
class Elementwise(Op):
    op: ClassVar[str] = p.ELEMENTWISE
    tokens: float
    width: float

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        return 0.0, 2 * BF16 * self.tokens * self.width


@dataclass(frozen=True)
class ElementwiseKernel(Elementwise):
    """An engine's memory-bound kernel where the profile has no elementwise table: outside the
    vocabulary, so the roofline fallback prices it with the engine's per-kernel figure."""

    op: ClassVar[str] = "elementwise_kernel"


@dataclass(frozen=True)
class EpDispatch(Op):
    """DeepEP dispatch: FP8 values plus one fp32 scale per 128, per rank, on the bottleneck
    link, copies per token as `comm.ep_copies` counts them in DeepEP's benchmark layout;
    `copies`, not a table attribute: a deployment's own count, where it sends the token."""

    op: ClassVar[str] = p.EP_DISPATCH
    per_value: ClassVar[float] = 1.0 + 4.0 / FP8_SCALE_GROUP
    tokens_per_rank: float
    ep: float
    mode: str
    link: str
    hidden: float
    topk: float
    copies: float | None = dataclasses.field(default=None, compare=False, kw_only=True)

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        copies = self.benchmark_copies() if self.copies is None else self.copies
        return 0.0, self.tokens_per_rank * copies * self.hidden * self.per_value

    def benchmark_copies(self) -> float:
        """Copies per token in DeepEP's benchmark layout, as its tables count them."""
        ep = int(self.ep)
        per_node = ep if self.link == "nvlink" else DEEPEP_GPUS_PER_NODE
        return ep_copies(
            int(self.topk),
            ep,
            per_node,
            self.mode,
            max_nodes=DEEPEP_MAX_NODES,
            nvlink_speedup=DEEPEP_NVLINK_SPEEDUP,
        )


@dataclass(frozen=True)
class EpCombine(EpDispatch):
    op: ClassVar[str] = p.EP_COMBINE
    per_value: ClassVar[float] = BF16


@dataclass(frozen=True)
class AllGather(Op):
    """A collective over `gpus` of a `bytes` tensor (all ranks' shares): (g-1)/g x bytes per
    GPU; `calls`, not a table attribute: collectives of this shape a step runs back to back (a
    gather and its scatter back, a layer's two all-reduces), each one's bytes counted (priced
    as one link read, so the table's fixed part is paid once for them)."""

    op: ClassVar[str] = p.ALL_GATHER
    passes: ClassVar[float] = 1.0
    bytes: float
    gpus: float
    link: str
    calls: float = dataclasses.field(default=1.0, compare=False, kw_only=True)

    def work(self, m: MlaSpec | None, elem_bytes: float) -> Work:
        g = self.gpus
        share = (g - 1) / g if g > 1 else 0.0
        return 0.0, self.calls * self.passes * share * self.bytes


@dataclass(frozen=True)
class AllToAll(AllGather):
    op: ClassVar[str] = p.ALL_TO_ALL


@dataclass(frozen=True)
class AllReduce(AllGather):
    """Ring all-reduce: 2(g-1)/g x bytes."""

    op: ClassVar[str] = p.ALL_REDUCE
    passes: ClassVar[float] = 2.0
