"""The discrete-event engine (the only package that imports simpy).

`simulate(deployment, cost_for, workload, run)` builds the pools and lock-step units of one
deployment, runs them on a fresh simpy Environment and returns a `SimOutput` whose request table
and step logs `sim.metrics.summarize` turns into results.
"""

from sim.engine.invariants import InvariantError, RequestCounts
from sim.engine.requests import EngineError, Phase, RequestTable
from sim.engine.router import ROUTERS, make_router
from sim.engine.run import SimOutput, simulate

__all__ = [
    "ROUTERS",
    "EngineError",
    "InvariantError",
    "Phase",
    "RequestCounts",
    "RequestTable",
    "SimOutput",
    "make_router",
    "simulate",
]
