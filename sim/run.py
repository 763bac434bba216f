"""`run_scenario(scenario) -> Results`: the one entry point of CLI, CI checks, the app and sweeps.

For each deployment it builds the cost model (`ServingCostModel(model, gpu, deployment,
profile)` unless a `cost_factory` is given), simulates it with the scenario's workload and seed,
checks the invariants and summarises. Deployments run one after another on the same requests.
"""

from __future__ import annotations

from collections.abc import Callable

from sim.catalog import load_gpu, load_model
from sim.cost.batch import ServingCost
from sim.engine import SimOutput, simulate
from sim.engine.arrivals import Batch
from sim.metrics import Results, summarize
from sim.specs.deployment import Deployment, PdDeployment
from sim.specs.gpu import GpuSpec
from sim.specs.model import ModelSpec
from sim.specs.scenario import Scenario
from sim.specs.workload import TraceWorkload

CostFactory = Callable[[ModelSpec, GpuSpec, Deployment, object | None], ServingCost]
ProgressFn = Callable[[str, float], None]  # (deployment name, fraction of the run done)


def default_cost_factory(
    model: ModelSpec, gpu: GpuSpec, deployment: Deployment, profile: object | None
) -> ServingCost:
    """`ServingCostModel`; a profile measured on another GPU lends its efficiencies to `gpu`'s
    roofline (every table estimate is then marked extrapolated)."""
    from sim.cost.serving import ServingCostModel  # the cost model is only needed to run
    from sim.specs.profile import Profile

    if profile is not None and not isinstance(profile, Profile):
        raise TypeError(f"profile must be a Profile, got {type(profile).__name__}")
    measured_on = None
    if profile is not None and profile.device.gpu and profile.device.gpu != gpu.name:
        measured_on = load_gpu(profile.device.gpu)
    return ServingCostModel(model, gpu, deployment, profile, profile_gpu=measured_on)


def load_profile_for(scenario: Scenario) -> object | None:
    """The scenario's profile by name or path; `null` prices every op on the GPU's datasheet
    roofline (efficiency 1, no launch cost), labelled "roofline"."""
    if scenario.profile is None:
        return None
    from sim.catalog.profiles import load_profile

    return load_profile(scenario.profile)


def load_trace(scenario: Scenario) -> Batch | None:
    if not isinstance(scenario.workload, TraceWorkload):
        return None
    from sim.io.workload_csv import read_trace

    return read_trace(scenario.workload.path)


def simulate_deployment(
    scenario: Scenario,
    dep: Deployment | PdDeployment,
    *,
    cost_factory: CostFactory = default_cost_factory,
    profile: object | None = None,
    trace: Batch | None = None,
    progress: ProgressFn | None = None,
) -> SimOutput:
    """Simulate one of the scenario's deployments (raw engine output, before summarising)."""
    model, gpu = load_model(scenario.model), load_gpu(scenario.gpu)

    def cost_for(d: Deployment) -> ServingCost:
        try:
            return cost_factory(model, gpu, d, profile)
        except ValueError as exc:
            raise ValueError(f"deployment {dep.name!r}: {exc}") from exc

    tick = (lambda f: progress(dep.name, f)) if progress is not None else None
    return simulate(
        dep, cost_for, scenario.workload, scenario.run, trace=trace, nic_gb_s=gpu.nic_gb_s,
        progress=tick,
    )  # fmt: skip


def simulate_scenario(
    scenario: Scenario,
    *,
    progress: ProgressFn | None = None,
    cost_factory: CostFactory | None = None,
) -> list[SimOutput]:
    """Raw engine output of every deployment (for traces); `run_scenario` summarises it."""
    profile = load_profile_for(scenario)
    trace = load_trace(scenario)
    factory = cost_factory or default_cost_factory
    return [
        simulate_deployment(
            scenario, dep, cost_factory=factory, profile=profile, trace=trace, progress=progress
        )
        for dep in scenario.deployments
    ]


def summarize_scenario(scenario: Scenario, outputs: list[SimOutput]) -> Results:
    """`Results` of a scenario from its deployments' engine outputs."""
    return Results(
        scenario=scenario.name,
        description=scenario.description,
        model=scenario.model,
        gpu=scenario.gpu,
        warmup_s=scenario.run.warmup_s,
        end_s=max(o.end_s for o in outputs),
        slo_ttft_s=scenario.slo.ttft_s,
        slo_tpot_s=scenario.slo.tpot_s,
        slo_percentile=scenario.slo.percentile,
        deployments=[summarize(o, scenario.slo) for o in outputs],
    )


def run_scenario(
    scenario: Scenario,
    *,
    progress: ProgressFn | None = None,
    cost_factory: CostFactory | None = None,
) -> Results:
    """Simulate every deployment of `scenario` and summarise; deterministic for a given seed.

    Deployments run one after another on the same requests. Raises ValueError (a deployment
    that does not fit its GPUs, an unknown router or profile), `TraceError` for a bad trace,
    and `sim.engine.InvariantError` if a run ends in an inconsistent state.
    """
    outputs = simulate_scenario(scenario, progress=progress, cost_factory=cost_factory)
    return summarize_scenario(scenario, outputs)
