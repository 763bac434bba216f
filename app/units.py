"""Display units: results are in seconds (`_s` fields); tables and cards show milliseconds."""

from __future__ import annotations


def ms(seconds: float | None) -> float | None:
    """Seconds to milliseconds; None (no samples) stays None."""
    return None if seconds is None else seconds * 1e3
