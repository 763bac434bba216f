"""How the `mlasim` tables write numbers: one place for every command's cells."""

from __future__ import annotations

from sim.metrics.stats import Percentiles


def num(x: float | None, digits: int = 3, scale: float = 1.0) -> str:
    """`x * scale` to `digits` significant figures, whole with separators from 1,000 up; '-'
    for None."""
    if x is None:
        return "-"
    v = x * scale
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.{digits}g}"


def beyond(x: float | None, exceeds: float | None, scale: float = 1.0) -> str:
    """A percentile, or '>' the largest value observed where it lies beyond all of them."""
    if x is None and exceeds is not None:
        return f">{num(exceeds, 3, scale)}"
    return num(x, 3, scale)


def pct(p: Percentiles, scale: float = 1e3) -> str:
    """p50 / p90 / p99; a percentile beyond every observed value (requests still waiting at the
    end outnumber its tail) shows as '>' the largest one."""
    return " / ".join(beyond(v, p.exceeds_s, scale) for v in (p.p50, p.p90, p.p99))


def with_ci(value: float, ci95: float | None) -> str:
    """A rate and its 95% interval's half-width as a share of it."""
    if ci95 is None or value <= 0:
        return num(value)
    return f"{num(value)} ±{100 * ci95 / value:.2g}%"
