"""`run_scenario(scenario) -> Results`: the one entry point of CLI, CI checks, the app and sweeps.

It takes a `ResolvedScenario` (`sim.io.resolve`: the scenario with its model, GPU, profiles and
trace looked up once) or a `Scenario`, which it resolves first. For each deployment it builds
the cost model (`ServingCostModel(model, gpu, deployment, profile)` unless a `cost_factory` is
given), simulates it with the scenario's workload and seed, checks the invariants and
summarises. Deployments run one after another on the same workload and seed (the same requests
for open loops and traces; `sim.engine.run` says what closed loops share). Two hooks serve the
front ends: `progress` (deployment name, fraction done) and `on_output`, which receives each
deployment's raw engine output (for traces, request exports and the app's latency samples).

The default cost models are kept per thread, the last `COST_MODELS_KEPT` built: a model
prices each step as a pure function of its batch, so the next run of the same deployment (a
sweep's next load, a capacity search's next probe, the app's next Run) prices exactly as a new
one would, from memos already warm.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from sim.cost.batch import ServingCost
from sim.engine import SimOutput, simulate
from sim.engine.arrivals import WorkloadRefused
from sim.io.resolve import ResolvedScenario, resolve
from sim.metrics import Results, summarize
from sim.specs.deployment import Deployment, PdDeployment
from sim.specs.gpu import GpuSpec
from sim.specs.model import ModelSpec
from sim.specs.profile import Profile
from sim.specs.scenario import Scenario
from sim.specs.workload import TraceWorkload, length_bounds, longest_length

CostFactory = Callable[[ModelSpec, GpuSpec, Deployment, Profile | None], ServingCost]
ProgressFn = Callable[[str, float], None]  # (deployment name, fraction of the run done)
OutputFn = Callable[[SimOutput], None]  # receives each deployment's engine output, in order


COST_MODELS_KEPT = 4  # a sweep's or the app's few deployments; each model's memos are bounded
Kept = OrderedDict[tuple[object, ...], tuple[tuple[object, ...], ServingCost]]


class _KeptModels(threading.local):
    """Each thread's kept models (a model's memos are not shared between threads): (the specs
    it was built from, held so that their ids stay theirs; the model), by their ids (the
    catalog hands out one object per name) and the deployment's value."""

    def __init__(self) -> None:
        self.models: Kept = OrderedDict()


_kept = _KeptModels()


def default_cost_factory(
    model: ModelSpec,
    gpu: GpuSpec,
    deployment: Deployment,
    profile: Profile | None,
    profile_gpu: GpuSpec | None = None,
) -> ServingCost:
    """`ServingCostModel`; a profile measured on another GPU (`profile_gpu`) lends its
    efficiencies to `gpu`'s roofline (every table estimate is then marked extrapolated). The
    same specs (the same objects: specs are frozen) and an equal deployment get the model
    built for them before, if it is among the last `COST_MODELS_KEPT`."""
    from sim.cost.serving import ServingCostModel  # the cost model is only needed to run

    specs = (model, gpu, profile, profile_gpu)
    key = (*(id(x) for x in specs), deployment)
    models = _kept.models
    kept = models.get(key)
    if kept is not None:
        models.move_to_end(key)
        return kept[1]
    cost = ServingCostModel(model, gpu, deployment, profile, profile_gpu=profile_gpu)
    models[key] = (specs, cost)
    if len(models) > COST_MODELS_KEPT:
        models.popitem(last=False)
    return cost


def forget_cost_models() -> None:
    """Drop this thread's kept cost models (its next runs build theirs anew, cold)."""
    _kept.models.clear()


def _resolved(scenario: Scenario | ResolvedScenario) -> ResolvedScenario:
    """The scenario resolved, with its trace read (each only once)."""
    if isinstance(scenario, ResolvedScenario):
        return scenario.with_trace()
    return resolve(scenario)


def check_context(resolved: ResolvedScenario) -> None:
    """ValueError when the workload's longest request (prompt + answer, where the lengths are
    bounded; else its shortest) exceeds the model's context, which a serving engine would
    refuse."""
    scenario, trace = resolved.scenario, resolved.trace
    w, limit = scenario.workload, resolved.model.max_position_tokens
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
    scenario: Scenario | ResolvedScenario,
    dep: Deployment | PdDeployment,
    *,
    cost_factory: CostFactory | None = None,
    profile: Profile | None = None,
) -> list[tuple[Deployment, ServingCost]]:
    """The cost model of each pool of `dep`, priced with the pool's engine profile or else
    `profile` (default: the scenario's); ValueError naming the deployment (and pool) when one
    cannot be built (it does not fit its GPUs, ...)."""
    r = _resolved(scenario)
    out = []
    for label, pool in _pools(dep):
        try:
            engine = r.engine_profiles.get(pool.engine) if pool.engine else None
            own = engine if r.scenario.profile is None and engine else profile or r.profile
            if cost_factory is None:
                cost = default_cost_factory(r.model, r.gpu, pool, own, r.measured_on(own))
            else:
                cost = cost_factory(r.model, r.gpu, pool, own)
            out.append((pool, cost))
        except ValueError as exc:
            raise _named(label, pool, exc) from exc
    return out


def simulate_deployment(
    scenario: Scenario | ResolvedScenario,
    dep: Deployment | PdDeployment,
    *,
    cost_factory: CostFactory | None = None,
    progress: ProgressFn | None = None,
    costs: list[tuple[Deployment, ServingCost]] | None = None,
) -> SimOutput:
    """Simulate one of the scenario's deployments (raw engine output, before summarising);
    `costs` from `build_costs`, else built here."""
    r = _resolved(scenario)
    built = costs or build_costs(r, dep, cost_factory=cost_factory)

    def cost_for(d: Deployment) -> ServingCost:
        for pool, cost in built:
            if pool is d:
                return cost
        raise RuntimeError(f"no cost model was built for pool {d.name!r} of {dep.name!r}")

    sc, trace = r.scenario, r.trace
    tick = (lambda f: progress(dep.name, f)) if progress is not None else None
    try:
        return simulate(
            dep, cost_for, sc.workload, sc.run, trace=trace, nic_gb_s=r.gpu.nic_gb_s,
            progress=tick,
        )  # fmt: skip
    except WorkloadRefused as exc:
        held = ", ".join(f"{c.kv_capacity_tokens_per_rank:,}" for _, c in built)
        raise ValueError(f"deployment {dep.name!r}: {exc} (KV per rank: {held} tokens)") from None


def simulate_scenario(
    scenario: Scenario | ResolvedScenario,
    *,
    progress: ProgressFn | None = None,
    cost_factory: CostFactory | None = None,
) -> list[SimOutput]:
    """Raw engine output of every deployment; `run_scenario` summarises it.

    Every deployment's cost model is built before the first simulation starts, so one that
    does not fit its GPUs fails at once, not after the others have run.
    """
    r = _resolved(scenario)
    check_context(r)
    deployments = r.scenario.deployments
    costs = [build_costs(r, dep, cost_factory=cost_factory) for dep in deployments]
    return [
        simulate_deployment(r, dep, progress=progress, costs=c)
        for dep, c in zip(deployments, costs, strict=True)
    ]


def summarize_scenario(scenario: Scenario | ResolvedScenario, outputs: list[SimOutput]) -> Results:
    """`Results` of a scenario from its deployments' engine outputs."""
    if isinstance(scenario, ResolvedScenario):
        scenario = scenario.scenario
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
    scenario: Scenario | ResolvedScenario,
    *,
    progress: ProgressFn | None = None,
    cost_factory: CostFactory | None = None,
    on_output: OutputFn | None = None,
) -> Results:
    """Simulate every deployment of `scenario` and summarise; deterministic for a given seed.

    Deployments run one after another on the same requests; `on_output` receives each one's
    engine output. Raises FieldError for a name the catalog does not know or a deployment the
    model cannot run (a `Scenario` is resolved first), ValueError naming the deployment when
    one does not fit its GPUs (before any simulation starts), `TraceError` for a bad trace, and
    `sim.engine.InvariantError` if a run ends in an inconsistent state.
    """
    r = _resolved(scenario)
    outputs = simulate_scenario(r, progress=progress, cost_factory=cost_factory)
    if on_output is not None:
        for out in outputs:
            on_output(out)
    return summarize_scenario(r, outputs)
