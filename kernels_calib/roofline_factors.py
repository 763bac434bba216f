"""Roofline efficiency factors derived from kernel tables (published or measured).

The same rules serve the bundled profiles and a fresh calibration:
- compute efficiency: median achieved/peak FLOP/s over large (>= 50 us, so launch cost is small)
  compute-bound points of GEMM-like tables (gemm, bmm, moe_*), of dense MLA tables (mla_*), and
  of sparse decode attention (dsa_attn_decode: gathering top-k rows, it reaches far less than
  dense attention; without such points, the fallback's or none, i.e. the attention factor);
- memory efficiency: median achieved/peak bandwidth over large memory-bound points of dense ops
  (GEMMs and dense MLA decode; grouped MoE GEMMs skip idle experts and DSA gathers rows, so
  their byte counts overstate);
- launch overhead: the measured per-kernel time of back-to-back tiny kernels when the run timed
  one (`elementwise.measure_launch`), else the smallest (latency - datasheet roofline) over all
  points;
- comm link efficiency: median achieved/link bandwidth over comm points.
Points above the datasheet roofline (efficiency > 1, implausible) are left out and listed.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from sim.specs.gpu import GpuSpec
from sim.specs.profile import (
    ATTENTION_OPS,
    COMM_OPS,
    DSA_ATTN_DECODE,
    Factor,
    OpTable,
    RooflineFactors,
)

GEMM_LIKE = frozenset({"gemm", "bmm", "moe_up", "moe_down"})
DENSE_MLA = frozenset(op for op in ATTENTION_OPS if op.startswith("mla_"))
LARGE_US = 50.0


@dataclass(frozen=True)
class _Point:
    op: str
    label: str
    compute_eff: float
    memory_eff: float
    compute_bound: bool
    residual_us: float
    large: bool


def _points(tables: Sequence[OpTable], gpu: GpuSpec) -> tuple[list[_Point], list[str]]:
    out, implausible = [], []
    for t in tables:
        if t.op in COMM_OPS:
            continue
        peak, bw = gpu.peak_flops_per_s(t.dtype), gpu.hbm_bytes_per_s
        for p in t.points:
            seconds = p.latency_us_p50 * 1e-6
            ce, me = p.flops / peak / seconds, p.hbm_bytes / bw / seconds
            label = f"{t.op} {t.key} {p.at}"
            if max(ce, me) > 1:
                implausible.append(
                    f"{label} ({t.source}): {max(ce, me):.2f}x the datasheet roofline"
                )
                continue
            residual = p.latency_us_p50 - max(ce, me) * p.latency_us_p50
            large = p.latency_us_p50 >= LARGE_US
            out.append(_Point(t.op, label, ce, me, ce >= me, residual, large))
    return out, implausible


def derive(
    tables: Sequence[OpTable],
    gpu: GpuSpec,
    what: str,
    fallback: RooflineFactors | None = None,
    fallback_what: str = "the fallback factors",
    measured_launch: Factor | None = None,
) -> tuple[RooflineFactors, list[str]]:
    """Factors from `tables` on `gpu`; a factor without data comes from `fallback`. `launch`, a
    `measured_launch`, a directly measured per-kernel launch cost, replaces the residual estimate.

    Returns the factors and notes (implausible points, factors taken from the fallback).
    Raises ValueError when a factor has neither data nor fallback.
    """
    points, notes = _points(tables, gpu)
    notes = [f"above the roofline, left out of the roofline factors: {n}" for n in notes]

    def median_compute(ops: frozenset[str], name: str) -> Factor | None:
        effs = [p.compute_eff for p in points if p.op in ops and p.compute_bound and p.large]
        if not effs:
            return None
        return Factor(
            value=statistics.median(effs),
            source=f"median achieved/peak FLOP/s over {len(effs)} compute-bound {name} points "
            f">= {LARGE_US:g} us of {what} on {gpu.name}",
        )

    gemm = median_compute(GEMM_LIKE, "GEMM")
    attention = median_compute(DENSE_MLA, "dense MLA attention")
    sparse = median_compute(frozenset({DSA_ATTN_DECODE}), "sparse (DSA) decode attention")
    if sparse is None and fallback is not None:
        sparse = fallback.sparse_decode_compute_efficiency
        if sparse is not None:
            notes.append(f"roofline sparse_decode_compute_efficiency: taken from {fallback_what}")
    memory = link = None
    launch = measured_launch
    dense = [
        p
        for p in points
        if not p.compute_bound and p.large and not p.op.startswith(("moe_", "dsa_"))
    ]
    if dense:
        memory = Factor(
            value=statistics.median(p.memory_eff for p in dense),
            source=f"median achieved/peak bandwidth over {len(dense)} memory-bound dense points "
            f">= {LARGE_US:g} us of {what} on {gpu.name}",
        )
    if launch is None and points:
        best = min(points, key=lambda p: p.residual_us)
        launch = Factor(
            value=max(best.residual_us, 0.0),
            source=f"smallest latency minus datasheet roofline over {len(points)} points of "
            f"{what} on {gpu.name} ({best.label})",
        )
    comm = [
        (p.hbm_bytes / t.link_bytes_per_s / (p.latency_us_p50 * 1e-6), t, p)
        for t in tables
        if t.op in COMM_OPS and t.link_bytes_per_s
        for p in t.points
    ]
    comm_effs = [c[0] for c in comm if c[0] <= 1]
    if comm_effs:
        dropped = len(comm) - len(comm_effs)
        link = Factor(
            value=statistics.median(comm_effs),
            source=f"median achieved/link bandwidth over {len(comm_effs)} comm points of {what}"
            + (f" ({dropped} above the link's nominal bandwidth left out)" if dropped else ""),
        )
    picked = {
        "gemm_compute_efficiency": gemm,
        "attention_compute_efficiency": attention,
        "memory_bandwidth_efficiency": memory,
        "launch_overhead_us": launch,
        "comm_link_efficiency": link,
    }
    for name, factor in picked.items():
        if factor is None:
            if fallback is None:
                raise ValueError(f"no {what} points to derive {name} from, and no fallback")
            picked[name] = getattr(fallback, name)
            notes.append(f"roofline {name}: no data in {what}; taken from {fallback_what}")
    factors = {**picked, "sparse_decode_compute_efficiency": sparse}
    return RooflineFactors.model_validate(factors), notes
