"""The discrete-event engine (the only package that imports simpy).

`simulate(deployment, cost_for, workload, run)` builds the pools and lock-step units of one
deployment, runs them on a fresh simpy Environment and returns a `SimOutput` whose plain
`RunRecord` (request columns, per-pool step logs and facts) `sim.metrics.summarize` turns into
results.
"""

from sim.engine.invariants import InvariantError, RequestCounts
from sim.engine.record import PoolRecord, RequestRecord, RunRecord
from sim.engine.requests import EngineError, Phase, RequestTable
from sim.engine.router import ROUTERS, make_router
from sim.engine.run import SimOutput, simulate

__all__ = [
    "ROUTERS",
    "EngineError",
    "InvariantError",
    "Phase",
    "PoolRecord",
    "RequestCounts",
    "RequestRecord",
    "RequestTable",
    "RunRecord",
    "SimOutput",
    "make_router",
    "simulate",
]
