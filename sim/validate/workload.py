"""The benchmark a measured row ran, as a workload: the one place that builds it.

aiconfigurator's benchmark (aiperf, `--concurrency N`, fixed ISL and OSL with ignore_eos, a
warm-up of 2N requests, then 20N measured) keeps N requests in flight: a closed loop of N users.
The simulator runs the same closed loop with fixed lengths. It is bounded so a row simulates in a
few CPU seconds: three rounds of N requests (two for long answers), all measured from the start,
so the first round's start-up (every user prefilling at once) is in the figures where the
benchmark's warm-up left it out. The `benchmark` workload kind (a semaphore client with a
warm-up, as bench_serving and aiperf run) replaces this when it lands.
"""

from __future__ import annotations

from typing import Any

from sim.validate.rows import MeasuredRow

ROUNDS = 3
ROUNDS_LONG = 2  # answers past LONG_OSL tokens: fewer rounds keep the run a few seconds
LONG_OSL = 2048


def row_workload(row: MeasuredRow) -> tuple[dict[str, Any], dict[str, Any]]:
    """The row's benchmark: (closed-loop `Workload` spec, `RunSpec`) as dicts, seed 0."""
    rounds = ROUNDS_LONG if row.osl > LONG_OSL else ROUNDS
    workload = dict(
        kind="closed",
        concurrency=row.concurrency,
        input=dict(kind="fixed", tokens=row.isl),
        output=dict(kind="fixed", tokens=row.osl),
    )
    return workload, dict(max_requests=rounds * row.concurrency, seed=0)
