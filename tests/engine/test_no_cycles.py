"""A run drops no reference cycles while it runs, so pausing the cyclic garbage collector
during it (`sim.engine.run.cycles_uncollected`) frees the same memory as running it: what a
step drops, reference counting frees. (What the run returns does hold cycles, a pool and its
units among them; they are collected as usual once the caller lets go of it.) Each case runs a
different part of the engine and the cost model: colocated chunked prefill, PD with its KV
transfer, two-batch overlap, MTP, attention TP and DP side by side."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from sim.engine import SimOutput
from sim.engine.run import cycles_uncollected
from sim.io.scenario_io import load_scenario
from sim.run import forget_cost_models, simulate_scenario
from sim.specs.scenario import Scenario

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _runs(name: str, duration_s: float) -> Scenario:
    scenario = load_scenario(SCENARIOS / f"{name}.yaml")
    run = scenario.run.model_copy(update={"duration_s": duration_s, "warmup_s": 2.0})
    return scenario.model_copy(update={"run": run})


def _steps(outputs: list[SimOutput]) -> int:
    return sum(pool.log.n for o in outputs for pool in o.cluster.pools)


@pytest.mark.parametrize(
    "name", ["pd-disaggregation", "two-batch-overlap", "mtp-mla-vs-gqa", "dp-attention-vs-tp"]
)
def test_a_run_leaves_no_cycles_that_grow_with_it(name: str) -> None:
    """The same scenario run for 8 s and for 32 s leaves the cycle collector the same garbage
    (none, or a few hundred objects of `inspect`'s signature parsing while a PD deployment is
    set up): none of it comes from the steps."""
    simulate_scenario(_runs(name, 8.0))  # lazy imports and first-use caches, once
    forget_cost_models()
    gc.collect()
    left: list[int] = []
    steps: list[int] = []
    with cycles_uncollected():  # as simulate runs: nothing collected until each check
        for duration_s in (8.0, 32.0):
            outputs = simulate_scenario(_runs(name, duration_s))
            left.append(gc.collect())
            steps.append(_steps(outputs))
            forget_cost_models()
            del outputs
            gc.collect()
    assert steps[1] > 2 * steps[0] > 0
    assert left[1] == left[0] < 1_000


def test_the_collector_is_restored_as_it_was() -> None:
    assert gc.isenabled()
    with cycles_uncollected():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with cycles_uncollected():
            pass
        assert not gc.isenabled()  # a caller's own pause is left in place
    finally:
        gc.enable()
    with pytest.raises(RuntimeError), cycles_uncollected():
        raise RuntimeError("a failed run")
    assert gc.isenabled()
