"""The Ray backend on a real local Ray. `make test` installs Ray (`mlasim[dist]`), so this runs
there and always in CI (`CI` set); elsewhere it is skipped without Ray. Results must equal the
serial backend's, point for point."""

from __future__ import annotations

import os

import pytest

from sim.search.backends import RayBackend, SerialBackend, run_all
from tests.builders import TINY, tiny

pytestmark = pytest.mark.slow  # a long module: it starts first (tests/conftest.py)

if os.environ.get("CI"):
    import ray  # CI installs it: a missing Ray must fail, not skip
else:
    ray = pytest.importorskip("ray")


def test_local_ray_cluster_gives_the_serial_results(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    points = [
        tiny(workload=TINY["workload"] | {"rate_req_s": r}, run=TINY["run"] | {"duration_s": 4.0})
        for r in (2.0, 6.0)
    ]
    with RayBackend() as backend:
        on_ray = run_all(backend, points)
        assert ray.is_initialized()
    assert not ray.is_initialized()  # the run started Ray, so closing stops it
    assert on_ray == run_all(SerialBackend(), points)
