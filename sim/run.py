"""`run_scenario(scenario) -> Results`: the one entry point of CLI, CI checks, the app and sweeps.

For each deployment it builds the cost model (`ServingCostModel(model, gpu, deployment,
profile)` unless a `cost_factory` is given), simulates it with the scenario's workload and seed,
checks the invariants and summarises. Deployments run one after another on the same workload
and seed (the same requests for open loops and traces; `sim.engine.run` says what closed loops
share).
"""

from __future__ import annotations

from collections.abc import Callable

from sim.catalog import load_gpu, load_model
from sim.cost.batch import ServingCost
from sim.engine import SimOutput, simulate
from sim.engine.arrivals import Batch, WorkloadRefused
from sim.metrics import Results, summarize
from sim.specs.deployment import Deployment, PdDeployment
from sim.specs.gpu import GpuSpec
from sim.specs.model import ModelSpec
from sim.specs.profile import Profile
from sim.specs.scenario import Scenario
from sim.specs.workload import TraceWorkload, length_bounds, longest_length

CostFactory = Callable[[ModelSpec, GpuSpec, Deployment, Profile | None], ServingCost]
ProgressFn = Callable[[str, float], None]  # (deployment name, fraction of the run done)


def default_cost_factory(
    model: ModelSpec, gpu: GpuSpec, deployment: Deployment, profile: Profile | None
) -> ServingCost:
    """`ServingCostModel`; a profile measured on another GPU lends its efficiencies to `gpu`'s
    roofline (every table estimate is then marked extrapolated)."""
    from sim.cost.serving import ServingCostModel  # the cost model is only needed to run

    measured_on = None
    if profile is not None and profile.device.gpu and profile.device.gpu != gpu.name:
        measured_on = load_gpu(profile.device.gpu)
    return ServingCostModel(model, gpu, deployment, profile, profile_gpu=measured_on)


def load_profile_for(scenario: Scenario) -> Profile | None:
    """The scenario's profile (`sim.catalog.profiles.scenario_profile_name`: omitted means the
    GPU's `<gpu>-roofline`); None for the bare datasheet roofline (efficiency 1, no launch cost),
    whose ops are labelled "roofline"."""
    from sim.catalog.profiles import load_profile, scenario_profile_name

    name = scenario_profile_name(scenario.profile, load_gpu(scenario.gpu).name)
    return None if name is None else load_profile(name)


def _engine_profile(scenario: Scenario, pool: Deployment) -> Profile | None:
    """A pool's own profile: its engine's production-kernel profile when the scenario names no
    profile and one is bundled for this GPU (None: the scenario's profile prices it)."""
    from sim.catalog.profiles import load_profile, scenario_profile_name

    if scenario.profile is not None or pool.engine is None:
        return None
    name = scenario_profile_name(None, load_gpu(scenario.gpu).name, pool.engine)
    return load_profile(name) if name and name.endswith(pool.engine) else None


def check_context(scenario: Scenario, trace: Batch | None) -> None:
    """ValueError when the workload's longest request (prompt + answer, where the lengths are
    bounded; else its shortest) exceeds the model's context, which a serving engine would
    refuse."""
    w, limit = scenario.workload, load_model(scenario.model).max_position_tokens
    if trace is not None:
        longest, where = int((trace.input_tokens + trace.output_tokens).max()), "the trace"
    elif isinstance(w, TraceWorkload):
        return
    else:
        where = "workload.input + workload.output"
        shortest = length_bounds(w.input) + length_bounds(w.output)
        ends = longest_length(w.input), longest_length(w.output)
        if ends[0] is None or ends[1] is None:  # unbounded: refuse only if none could fit
            if shortest > limit:
                raise ValueError(
                    f"{where}: every request is at least {shortest:,} tokens (prompt + answer), "
                    f"beyond {scenario.model}'s {limit:,}-token context; shorten them"
                )
            return
        longest = ends[0] + ends[1]
    if longest > limit:
        raise ValueError(
            f"{where}: requests up to {longest:,} tokens (prompt + answer) exceed "
            f"{scenario.model}'s {limit:,}-token context; shorten them"
        )


def load_trace(scenario: Scenario) -> Batch | None:
    if not isinstance(scenario.workload, TraceWorkload):
        return None
    from sim.io.workload_csv import read_trace

    return read_trace(scenario.workload.path)


def _pools(dep: Deployment | PdDeployment) -> list[tuple[str, Deployment]]:
    """(label in messages, pool spec) for each pool: `pd.prefill`, `pd.decode` or the unit."""
    if isinstance(dep, PdDeployment):
        return [(f"{dep.name}.prefill", dep.prefill), (f"{dep.name}.decode", dep.decode)]
    return [(dep.name, dep)]


def _named(label: str, pool: Deployment, exc: ValueError) -> ValueError:
    """The cost model's error, naming the deployment (and PD pool) once."""
    own = f"deployment {pool.name!r} "  # the cost model may name the pool spec itself
    msg = str(exc)
    if msg.startswith(own):
        return ValueError(f"deployment {label!r} {msg.removeprefix(own)}")
    return ValueError(f"deployment {label!r}: {msg}")


def build_costs(
    scenario: Scenario,
    dep: Deployment | PdDeployment,
    *,
    cost_factory: CostFactory = default_cost_factory,
    profile: Profile | None = None,
) -> list[tuple[Deployment, ServingCost]]:
    """The cost model of each pool of `dep`; ValueError naming the deployment (and pool) when
    one cannot be built (it does not fit its GPUs, ...)."""
    model, gpu = load_model(scenario.model), load_gpu(scenario.gpu)
    out = []
    for label, pool in _pools(dep):
        try:
            own = _engine_profile(scenario, pool) or profile
            out.append((pool, cost_factory(model, gpu, pool, own)))
        except ValueError as exc:
            raise _named(label, pool, exc) from exc
    return out


def simulate_deployment(
    scenario: Scenario,
    dep: Deployment | PdDeployment,
    *,
    cost_factory: CostFactory = default_cost_factory,
    profile: Profile | None = None,
    trace: Batch | None = None,
    progress: ProgressFn | None = None,
    costs: list[tuple[Deployment, ServingCost]] | None = None,
) -> SimOutput:
    """Simulate one of the scenario's deployments (raw engine output, before summarising);
    `costs` from `build_costs`, else built here."""
    built = costs or build_costs(scenario, dep, cost_factory=cost_factory, profile=profile)

    def cost_for(d: Deployment) -> ServingCost:
        for pool, cost in built:
            if pool is d:
                return cost
        raise RuntimeError(f"no cost model was built for pool {d.name!r} of {dep.name!r}")

    gpu = load_gpu(scenario.gpu)
    tick = (lambda f: progress(dep.name, f)) if progress is not None else None
    try:
        return simulate(
            dep, cost_for, scenario.workload, scenario.run, trace=trace, nic_gb_s=gpu.nic_gb_s,
            progress=tick,
        )  # fmt: skip
    except WorkloadRefused as exc:
        held = ", ".join(f"{c.kv_capacity_tokens_per_rank:,}" for _, c in built)
        raise ValueError(f"deployment {dep.name!r}: {exc} (KV per rank: {held} tokens)") from None


def simulate_scenario(
    scenario: Scenario,
    *,
    progress: ProgressFn | None = None,
    cost_factory: CostFactory | None = None,
) -> list[SimOutput]:
    """Raw engine output of every deployment (for traces); `run_scenario` summarises it.

    Every deployment's cost model is built before the first simulation starts, so one that
    does not fit its GPUs fails at once, not after the others have run.
    """
    profile = load_profile_for(scenario)
    trace = load_trace(scenario)
    check_context(scenario, trace)
    factory = cost_factory or default_cost_factory
    costs = [
        build_costs(scenario, dep, cost_factory=factory, profile=profile)
        for dep in scenario.deployments
    ]
    return [
        simulate_deployment(scenario, dep, trace=trace, progress=progress, costs=c)
        for dep, c in zip(scenario.deployments, costs, strict=True)
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
        deployments=[summarize(o.record, scenario.slo) for o in outputs],
    )


def run_scenario(
    scenario: Scenario,
    *,
    progress: ProgressFn | None = None,
    cost_factory: CostFactory | None = None,
) -> Results:
    """Simulate every deployment of `scenario` and summarise; deterministic for a given seed.

    Deployments run one after another on the same requests. Raises ValueError naming the
    deployment when one does not fit its GPUs (before any simulation starts), `TraceError` for
    a bad trace, and `sim.engine.InvariantError` if a run ends in an inconsistent state. Names
    (model, GPU, profile, router, MLA policy) were checked when the `Scenario` was validated.
    """
    outputs = simulate_scenario(scenario, progress=progress, cost_factory=cost_factory)
    return summarize_scenario(scenario, outputs)
