"""Peak memory of the largest accepted run stays under the documented bound (docs/limits.md).

The default limit set bounds the requests one run creates at 2,000,000; an open loop counts
rate x duration x 1.1 + 64. The largest accepted open-loop run in one simulated second is
simulated here in a fresh process, whose peak resident set (ru_maxrss) is then read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim.specs.limits import DEFAULT
from sim.specs.scenario import Scenario
from tests.builders import TINY, tiny

ROOT = Path(__file__).resolve().parents[2]
PEAK_BOUND_BYTES = 2 * 2**30  # docs/limits.md: a default-set run's peak memory
LARGEST_RATE = (DEFAULT.max_requests - 64) / 1.1  # req/s over one simulated second

CHILD = """
import json, resource, sys
from sim.run import run_scenario
from sim.specs.scenario import Scenario
d = run_scenario(Scenario.model_validate_json(sys.stdin.read())).deployments[0]
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
print(json.dumps({"arrived": d.requests.arrived, "peak_bytes": peak}))
"""


def _largest(rate: float) -> Scenario:
    workload = TINY["workload"] | {"rate_req_s": rate}
    return tiny(deployments=TINY["deployments"][1:], workload=workload,
                run={"duration_s": 1.0, "warmup_s": 0.0, "seed": 1})  # fmt: skip


def test_one_request_more_is_refused() -> None:
    with pytest.raises(ValueError, match="over the limit of 2,000,000 requests per run"):
        _largest(LARGEST_RATE * 1.001)


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss is in KiB on Linux only")
def test_the_largest_accepted_request_count_stays_under_the_memory_bound() -> None:
    sc = _largest(int(LARGEST_RATE))
    out = subprocess.run(
        [sys.executable, "-c", CHILD], input=sc.model_dump_json(), capture_output=True,
        text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True,
    )  # fmt: skip
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["arrived"] > 1_750_000  # most of the 2M accepted requests really arrived
    print(f"peak {got['peak_bytes'] / 2**20:.0f} MiB for {got['arrived']:,} arrivals")
    assert got["peak_bytes"] < PEAK_BOUND_BYTES, f"peak {got['peak_bytes'] / 2**20:.0f} MiB"
