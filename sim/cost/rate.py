"""An op's time, and the rate that turns an op's roofline work into it.

`OpTime` is what any pricing returns: seconds, where they came from ("measured" | "published" |
"roofline"), whether a table was read outside what it measured, and how it was read (`detail`,
empty for the engine's per-step times). The roofline, the calibration tables and the
communication links all answer with one.

`OpTime.launches` counts the kernels in that time priced by a roofline, whose fixed part per
call is the deployment's launch figure (`sim.cost.overheads`; the profile's without an engine):
the step log takes their launches out of each op's row into one of their own (`LAUNCH_ROW`,
`sim.engine.log`). A table's kernels carry their launch inside their measured time and count
none.

`Rate` is an op's price at one shape: seconds per roofline second of compute and of memory
(link) traffic, the inverse of the efficiency each resource runs at, plus fixed seconds per
call. `Rate.time` prices any amount of work at that shape: the slower resource plus the fixed
part. The roofline, the tables (`sim.cost.calibrated`) and the links answer with one directly;
`sim.cost.pricing` applies it to a step's own work.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

SOURCE_RANK = {"roofline": 0, "published": 1, "measured": 2}
LAUNCH_ROW = "kernel_launch"  # the step breakdown's row of roofline-priced kernels' launches


@dataclass(frozen=True, kw_only=True)
class OpTime:
    """Time one op takes (or contributed to a step), and where that time came from."""

    seconds: float
    source: str  # "measured" | "published" | "roofline"
    extrapolated: bool = False
    detail: str = ""
    launches: float = 0.0  # roofline-priced kernel calls in `seconds`, each paying the launch


ZERO = OpTime(seconds=0.0, source="roofline")


@dataclass(frozen=True, kw_only=True)
class Rate:
    """An op's price at one shape: `compute_s_per_s` and `memory_s_per_s` seconds per roofline
    second of compute and of memory (comm ops: link) traffic (1 / the efficiency each runs at;
    0 for a resource the op does not use), and `fixed_s` seconds per call (launch, sync)."""

    compute_s_per_s: float
    memory_s_per_s: float
    fixed_s: float
    source: str  # "measured" | "published" | "roofline"
    extrapolated: bool = False
    detail: str = ""  # how the rate was read (which table, where)

    @property
    def compute_efficiency(self) -> float:
        """Fraction of peak compute the op's FLOPs run at (inf for an op without any)."""
        return 1.0 / self.compute_s_per_s if self.compute_s_per_s > 0 else float("inf")

    @property
    def memory_efficiency(self) -> float:
        """Fraction of HBM (comm ops: link) bandwidth its bytes move at (inf without any)."""
        return 1.0 / self.memory_s_per_s if self.memory_s_per_s > 0 else float("inf")

    @property
    def launches(self) -> float:
        """Launches one call counts: 1 where the fixed part is a roofline's launch figure."""
        return 1.0 if self.source == "roofline" and self.fixed_s > 0.0 else 0.0

    def time(self, compute_s: float, memory_s: float) -> OpTime:
        """Seconds of the op doing `compute_s` and `memory_s` roofline seconds of work."""
        seconds = max(self.compute_s_per_s * compute_s, self.memory_s_per_s * memory_s)
        return OpTime(
            seconds=seconds + self.fixed_s,
            source=self.source,
            extrapolated=self.extrapolated,
            launches=self.launches,
        )

    def times(
        self, compute_s: NDArray[np.float64], memory_s: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """`time`'s seconds of arrays of work, element by element: the same floats."""
        seconds = np.maximum(self.compute_s_per_s * compute_s, self.memory_s_per_s * memory_s)
        return seconds + self.fixed_s  # type: ignore[no-any-return]


def combine(*times: OpTime) -> OpTime:
    """Sum of several priced pieces, labelled with the weakest source among them (the first
    of the weakest). One pass, the pieces with time added in order from 0: the sums `sum`
    gives on Python 3.11, without its per-piece generators (a step prices dozens of these)."""
    seconds: float = 0
    launches: float = 0
    weakest: str | None = None
    rank, extrapolated = len(SOURCE_RANK), False
    for t in times:
        if t.seconds > 0.0:
            seconds += t.seconds
            launches += t.launches
            r = SOURCE_RANK.get(t.source, 0)
            if r < rank:
                rank, weakest = r, t.source
            if t.extrapolated:
                extrapolated = True
    if weakest is None:
        return ZERO
    return OpTime(seconds=seconds, source=weakest, extrapolated=extrapolated, launches=launches)


def scale(t: OpTime, factor: float) -> OpTime:
    return OpTime(
        seconds=t.seconds * factor,
        source=t.source,
        extrapolated=t.extrapolated,
        launches=t.launches * factor,
    )


def total_seconds(ops: Mapping[str, OpTime]) -> float:
    """The ops' seconds summed in their order (a list: one call, the same sum)."""
    return sum([t.seconds for t in ops.values()])
