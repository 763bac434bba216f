"""What a capacity search says about its probes in words: what a failing probe missed, a
thin-evidence caution, and the near-miss warning."""

from __future__ import annotations

from sim.metrics.results import few_finished
from sim.search.capacity_report import Probe
from sim.specs.scenario import Slo

# a latency at or above this share of its target at the lowest rate probed is a near miss: the
# answer then rests on a margin that another seed's noise (a few percent) can cross
NEAR_MISS = 0.9


def backlog_limit(rate_req_s: float, slo: Slo) -> float:
    """Most requests that may still wait for admission at the end: one TTFT target's arrivals."""
    return rate_req_s * slo.ttft_s


def missed(p: Probe, slo: Slo) -> str:
    """What a failing probe missed, in words."""
    pct = f"p{slo.percentile:g}"
    parts = []
    if p.ttft_s is not None and p.ttft_s > slo.ttft_s:
        parts.append(f"TTFT {pct} {p.ttft_s:.3g} s > {slo.ttft_s:g} s")
    if p.tpot_s is not None and p.tpot_s > slo.tpot_s:
        parts.append(f"TPOT {pct} {p.tpot_s * 1e3:.3g} ms > {slo.tpot_s * 1e3:g} ms")
    if p.queued > backlog_limit(p.rate_req_s, slo):
        parts.append(f"{p.queued} requests still queued")
    if p.rejected:
        parts.append(f"{p.rejected} rejected")
    return ", ".join(parts) or "the SLO"


def thin_evidence(p: Probe) -> str | None:
    """A caution when most of a probe's requests did not finish in its window: TPOT and the
    verdict then rest on the earliest or shortest (the run is too short for the answers)."""
    if not few_finished(p.arrived, p.completed):
        return None
    return (
        f"at {p.rate_req_s:.4g} req/s only {p.completed:,} of {p.arrived:,} requests finished "
        "in the window, so the verdict rests on the earliest or shortest: lengthen "
        "run.duration_s before trusting it"
    )


def near_miss(low: Probe, slo: Slo, ttft_target_s: float) -> str | None:
    """A warning when `low`, the lowest rate probed, is within 10% of a latency target: met with
    TTFT or TPOT already at 90% or more of it (a single request's latency is near the target, so
    the maximum found rests on a margin another seed can cross), or missed by at most 10% (the
    layout nearly serves the SLO: a small change may make it)."""
    pct = f"p{slo.percentile:g}"
    pairs = (("TTFT", low.ttft_s, ttft_target_s), ("TPOT", low.tpot_s, slo.tpot_s))
    ratios = [(n, v, t, v / t) for n, v, t in pairs if v is not None and t > 0]
    words = [f"{n} {pct} {v:.3g} s is {r:.0%} of its {t:.4g} s target" for n, v, t, r in ratios]
    at = f"at the lowest rate probed ({low.rate_req_s:.4g} req/s)"
    if low.meets_slo:
        close = [w for w, (*_, r) in zip(words, ratios, strict=True) if r >= NEAR_MISS]
        if not close:
            return None
        return (
            f"near miss: {at} {' and '.join(close)}; the SLO is nearly missed before load builds "
            "up, so the maximum rests on a thin margin: relax the SLO or change the deployment "
            "before trusting it"
        )
    over = [(w, r) for w, (*_, r) in zip(words, ratios, strict=True) if r > 1]
    if not over or low.rejected or any(r > 2 - NEAR_MISS for _, r in over):
        return None
    return (
        f"near miss: {at} {' and '.join(w for w, _ in over)}: missed by a small margin; a "
        "slightly looser SLO or a small change to the deployment may meet it"
    )
