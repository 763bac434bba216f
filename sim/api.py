"""The public API of the simulator: what front ends (the Streamlit app) import from `sim`.

Two modules form the contract. `sim.specs` holds the data: the frozen spec classes a caller
builds and passes in (`Scenario`, `Deployment`, `PdDeployment`, `ModelSpec`, `GpuSpec`,
`Profile`, ...), the same ones scenario files validate into. This module holds the functions
and result types: resolving (`resolve`: a scenario's names looked up once) and running a
scenario, per-request latencies, memory plans, the cost model and MLA formulas, the catalog
loaders, scenario files and expectations, sweeps and capacity search.
Everything else under `sim` is internal and may be reorganised without notice; the names here
are kept stable.
"""

from __future__ import annotations

# catalog: bundled models, GPUs and calibration profiles, by name or path
from sim.catalog import CatalogError, gpu_names, load_gpu, load_model, model_names
from sim.catalog.profiles import load_profile, parse_profile, profile_names

# scenario files, results files, `expect:` lines and probes
from sim.checks import expect
from sim.checks.namespace import ExpectError, build_namespace
from sim.checks.probes import ProbeError, compute_probes

# cost model: MLA formulas, arithmetic intensity, roofline, memory plan, one step's cost
from sim.cost import mla
from sim.cost.batch import BatchShape, StepCost
from sim.cost.dispatch import policy_names
from sim.cost.intensity import IntensityRow, family_table, model_decode_intensity
from sim.cost.memory import MemoryPlan, plan_memory
from sim.cost.overheads import OVERLAP_ROWS, TWO_BATCH_OVERLAP_ROW
from sim.cost.rate import LAUNCH_ROW
from sim.cost.roofline import roofline_seconds
from sim.cost.serving import ServingCostModel

# running a scenario and its results
from sim.engine import SimOutput
from sim.io.resolve import ResolvedScenario, resolve
from sim.io.results_io import csv_text, results_dict
from sim.io.scenario_io import (
    ScenarioError,
    load_resolved,
    load_scenario,
    parse_resolved,
    parse_scenario,
)
from sim.metrics import (
    DeploymentResults,
    Percentiles,
    PoolResults,
    RequestLatencies,
    Results,
    request_latencies,
    throughput_vs,
)
from sim.metrics.notes import run_notes

# the planner: layout search, Pareto frontier, cost and launch commands
from sim.plan.planner import Plan, make_plan, pareto
from sim.plan.report import PNG_NOTE, pareto_figure
from sim.plan.report import columns as plan_columns
from sim.plan.report import top_rows as plan_top_rows
from sim.plan.spec import PlanRequest, PlanSpace
from sim.run import forget_cost_models, run_scenario, simulate_scenario, summarize_scenario

# sweeps and capacity search
from sim.search.backends import ProcessBackend
from sim.search.capacity import OPEN_LOOP, CapacityError, ProbeFn, capacity_search, search_count
from sim.search.capacity_report import CapacityReport, CapacityResult, PdPoolsResult
from sim.search.load import DEFAULT_FACTORS, Curves, load_of, load_points, run_load_sweep
from sim.specs.base import FieldError

__all__ = [
    "DEFAULT_FACTORS",
    "LAUNCH_ROW",
    "OPEN_LOOP",
    "OVERLAP_ROWS",
    "PNG_NOTE",
    "TWO_BATCH_OVERLAP_ROW",
    "BatchShape",
    "CapacityError",
    "CapacityReport",
    "CapacityResult",
    "CatalogError",
    "Curves",
    "DeploymentResults",
    "ExpectError",
    "FieldError",
    "IntensityRow",
    "MemoryPlan",
    "PdPoolsResult",
    "Percentiles",
    "Plan",
    "PlanRequest",
    "PlanSpace",
    "PoolResults",
    "ProbeError",
    "ProbeFn",
    "ProcessBackend",
    "RequestLatencies",
    "ResolvedScenario",
    "Results",
    "ScenarioError",
    "ServingCostModel",
    "SimOutput",
    "StepCost",
    "build_namespace",
    "capacity_search",
    "compute_probes",
    "csv_text",
    "expect",
    "family_table",
    "forget_cost_models",
    "gpu_names",
    "load_gpu",
    "load_model",
    "load_of",
    "load_points",
    "load_profile",
    "load_resolved",
    "load_scenario",
    "make_plan",
    "mla",
    "model_decode_intensity",
    "model_names",
    "pareto",
    "pareto_figure",
    "parse_profile",
    "parse_resolved",
    "parse_scenario",
    "plan_columns",
    "plan_memory",
    "plan_top_rows",
    "policy_names",
    "profile_names",
    "request_latencies",
    "resolve",
    "results_dict",
    "roofline_seconds",
    "run_load_sweep",
    "run_notes",
    "run_scenario",
    "search_count",
    "simulate_scenario",
    "summarize_scenario",
    "throughput_vs",
]
