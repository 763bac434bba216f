"""From a simulated run to reported figures: `summarize()` -> `DeploymentResults` / `Results`."""

from sim.metrics.requests import RequestLatencies, request_latencies
from sim.metrics.results import (
    DeploymentResults,
    PoolResults,
    RequestCountsOut,
    Results,
    throughput_vs,
)
from sim.metrics.stats import Percentiles
from sim.metrics.summary import summarize

__all__ = [
    "DeploymentResults",
    "Percentiles",
    "PoolResults",
    "RequestCountsOut",
    "RequestLatencies",
    "Results",
    "request_latencies",
    "summarize",
    "throughput_vs",
]
