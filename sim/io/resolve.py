"""A scenario with its names resolved: the model, GPU, profiles and trace it names, looked up once.

A `Scenario` validates its shape only; `resolve` turns it into what a run needs
(`ResolvedScenario`), checks the deployments against the model, and gives every deployment that
leaves `weight_dtype` out the checkpoint's own weights. Its errors are `FieldError`s carrying the
field they are about (`("profile",)`, `("deployments", 1, "attn_tp")`), so a scenario file's
loader names the line. The run, the notes, the CLI and the app all take the resolved scenario,
so each catalog name is looked up once per run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import DATASHEET, load_profile, scenario_profile_name
from sim.engine.arrivals import Batch
from sim.specs.base import FieldError
from sim.specs.deployment import Deployment, PdDeployment
from sim.specs.gpu import GpuSpec
from sim.specs.model import ModelSpec
from sim.specs.profile import Profile
from sim.specs.scenario import Scenario, check_against_model, with_weights
from sim.specs.workload import TraceWorkload


@dataclass(frozen=True)
class ResolvedScenario:
    """A validated scenario and everything it names, resolved."""

    scenario: Scenario  # with each deployment's weight_dtype spelled out
    model: ModelSpec
    gpu: GpuSpec
    profile: Profile | None  # None: the bare datasheet roofline
    # the GPUs profiles were measured on, where not `gpu` (their efficiencies lend to its roofline)
    profile_gpus: Mapping[str, GpuSpec] = field(default_factory=dict)
    # a pool's engine -> its production-kernel profile on this GPU (engines with one bundled)
    engine_profiles: Mapping[str, Profile] = field(default_factory=dict)
    trace: Batch | None = None  # the rows of a trace workload, when it was read

    def profile_for(self, pool: Deployment) -> Profile | None:
        """The profile a pool is priced with: its engine's production-kernel profile when the
        scenario names no profile and one is bundled for this GPU, else the scenario's."""
        if self.scenario.profile is None and pool.engine and pool.engine in self.engine_profiles:
            return self.engine_profiles[pool.engine]
        return self.profile

    def with_trace(self) -> ResolvedScenario:
        """This scenario with its trace workload's rows read (itself when there is none to read
        or it was read already); `TraceError` for a trace that cannot be read."""
        workload = self.scenario.workload
        if self.trace is not None or not isinstance(workload, TraceWorkload):
            return self
        from sim.io.workload_csv import read_trace

        return replace(self, trace=read_trace(workload.path))

    def measured_on(self, profile: Profile | None) -> GpuSpec | None:
        """The GPU `profile` was measured on, where it is not the scenario's GPU."""
        if profile is None or not profile.device.gpu or profile.device.gpu == self.gpu.name:
            return None
        return self.profile_gpus[profile.device.gpu]


def _pools(dep: Deployment | PdDeployment) -> list[Deployment]:
    return [dep.prefill, dep.decode] if isinstance(dep, PdDeployment) else [dep]


T = TypeVar("T")


def _lookup(loc: str, load: Callable[[str], T], name: str) -> T:
    """`load(name)`, a catalog error becoming a FieldError at `loc`."""
    try:
        return load(name)
    except ValueError as exc:  # CatalogError is a ValueError
        raise FieldError((loc,), str(exc), f"{loc}: {exc}") from None


def _profile_gpus(profiles: list[Profile], gpu: GpuSpec, named: str | None) -> dict[str, GpuSpec]:
    out: dict[str, GpuSpec] = {}
    for p in profiles:
        on = p.device.gpu
        if not on or on == gpu.name or on in out:
            continue
        try:
            out[on] = load_gpu(on)
        except ValueError as exc:
            message = (
                f"{named!r} was measured on {on!r}, which is not a known GPU ({exc}); use a "
                "profile of a catalog GPU"
            )
            raise FieldError(("profile",), message, f"profile: {message}") from None
    return out


def resolve(scenario: Scenario, *, read_trace: bool = True) -> ResolvedScenario:
    """Look up the scenario's model, GPU and profiles (each once), check the deployments
    against the model, and read a trace workload's file (unless `read_trace` is False).

    Raises FieldError for a name the catalog does not know (listing the known ones) or a
    deployment the model cannot run; `TraceError` for a trace that cannot be read.
    """
    gpu = _lookup("gpu", load_gpu, scenario.gpu)
    model = _lookup("model", load_model, scenario.model)
    profile: Profile | None = None
    if scenario.profile not in (None, DATASHEET):
        profile = _lookup("profile", load_profile, str(scenario.profile))
    else:  # omitted: the GPU's bundled `<gpu>-roofline`, or the datasheet without one
        name = scenario_profile_name(scenario.profile, gpu.name)
        profile = None if name is None else load_profile(name)
    profile_gpus = _profile_gpus([profile] if profile else [], gpu, scenario.profile)
    deployments = [with_weights(d, model.weight_dtype) for d in scenario.deployments]
    check_against_model(deployments, model)
    engine_profiles: dict[str, Profile] = {}
    if scenario.profile is None:
        engines = {p.engine for d in deployments for p in _pools(d) if p.engine is not None}
        for engine in sorted(engines):
            name = scenario_profile_name(None, gpu.name, engine)
            if name and name.endswith(engine):
                engine_profiles[engine] = load_profile(name)
    profile_gpus |= _profile_gpus(list(engine_profiles.values()), gpu, None)
    resolved = ResolvedScenario(
        scenario=scenario.model_copy(update={"deployments": deployments}),
        model=model,
        gpu=gpu,
        profile=profile,
        profile_gpus=profile_gpus,
        engine_profiles=engine_profiles,
    )
    return resolved.with_trace() if read_trace else resolved
