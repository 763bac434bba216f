"""Validated, frozen inputs: models, GPUs, deployments, workloads, scenarios.

The names below load on first use (PEP 562), so importing one spec module (the catalog reads
only models and GPUs) does not build every spec class: `mlasim models` stays quick.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_HOMES = {
    "deployment": ("Deployment", "PdDeployment"),
    "gpu": ("GpuSpec",),
    "model": ("DsaSpec", "GqaSpec", "LinearAttentionSpec", "MlaSpec", "ModelSpec", "MoeSpec"),
    "scenario": ("RunSpec", "Scenario", "Slo"),
    "workload": (
        "ClosedWorkload",
        "EmpiricalLength",
        "FixedLength",
        "GammaWorkload",
        "LognormalLength",
        "PoissonWorkload",
        "TraceWorkload",
        "UniformLength",
    ),
}
_MODULE_OF = {name: module for module, names in _HOMES.items() for name in names}

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


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'sim.specs' has no attribute {name!r}")
    return getattr(importlib.import_module(f"sim.specs.{module}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
