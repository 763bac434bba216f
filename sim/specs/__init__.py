"""Validated, frozen inputs: models, GPUs, deployments, workloads, scenarios."""

from sim.specs.deployment import Deployment, PdDeployment
from sim.specs.gpu import GpuSpec
from sim.specs.model import DsaSpec, GqaSpec, LinearAttentionSpec, MlaSpec, ModelSpec, MoeSpec
from sim.specs.scenario import RunSpec, Scenario, Slo
from sim.specs.workload import (
    ClosedWorkload,
    EmpiricalLength,
    FixedLength,
    GammaWorkload,
    LognormalLength,
    PoissonWorkload,
    TraceWorkload,
    UniformLength,
)

__all__ = [
    "ClosedWorkload",
    "Deployment",
    "DsaSpec",
    "EmpiricalLength",
    "FixedLength",
    "GammaWorkload",
    "GpuSpec",
    "GqaSpec",
    "LinearAttentionSpec",
    "LognormalLength",
    "MlaSpec",
    "ModelSpec",
    "MoeSpec",
    "PdDeployment",
    "PoissonWorkload",
    "RunSpec",
    "Scenario",
    "Slo",
    "TraceWorkload",
    "UniformLength",
]
