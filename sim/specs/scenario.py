"""A what-if study: one model on one GPU type, several deployments, one workload, one SLO.

`deployments` lists the layouts to compare. An entry with `prefill` and `decode` keys is a
`PdDeployment` (disaggregated pools); any other entry is a `Deployment` (one colocated unit type).
Deployment names are used in `expect:` expressions (`dp_ep.output_tok_s_per_gpu`), so they must
be unique Python identifiers.

Validating a `Scenario` checks its shape only: `model`, `gpu` and `profile` are names or paths,
looked up by `sim.io.resolve.resolve`, which also checks the deployments against the model
(`check_against_model`) and gives every deployment that leaves `weight_dtype` out the
checkpoint's own (`with_weights`). Its errors, like the ones here, carry their field
(`FieldError.loc`), which `sim.io.scenario_io` turns into the file's line.
"""

from __future__ import annotations

import keyword
from typing import Annotated, Any

from pydantic import Discriminator, Field, Tag, model_validator

from sim.specs.base import FieldError, Spec
from sim.specs.deployment import Deployment, PdDeployment
from sim.specs.model import ModelSpec
from sim.specs.scenario_limits import check_scenario_limits
from sim.specs.workload import BenchmarkWorkload, Workload


def _deployment_kind(value: Any) -> str:
    if isinstance(value, PdDeployment):
        return "pd"
    if isinstance(value, dict) and ("prefill" in value or "decode" in value):
        return "pd"
    return "unit"


AnyDeployment = Annotated[
    Annotated[Deployment, Tag("unit")] | Annotated[PdDeployment, Tag("pd")],
    Discriminator(_deployment_kind),
]


class Slo(Spec):
    """Latency targets; a request meets the SLO when both its TTFT and its TPOT do."""

    ttft_s: float = Field(gt=0, description="Time to first token target, seconds.")
    tpot_s: float = Field(gt=0, description="Time per output token target, seconds.")
    percentile: float = Field(
        default=90.0, gt=0, le=100, description="Percentile at which the targets must hold."
    )


class RunSpec(Spec):
    """How long to simulate and what to leave out of the measurements."""

    duration_s: float | None = Field(
        default=None, gt=0, description="Simulated time; arrivals after it are not generated."
    )
    max_requests: int | None = Field(
        default=None, ge=1, description="Stop generating requests after this many."
    )
    warmup_s: float = Field(
        default=0.0,
        ge=0,
        description="Leading simulated time left out: rates count what happened after it, "
        "latencies the requests that arrived after it (kv_transfer_s_mean, the pools' "
        "preemptions and kv_utilisation_peak, and step_sources cover the whole run).",
    )
    seed: int = Field(default=0, ge=0, description="Seed of the run's random generator.")

    @model_validator(mode="after")
    def _bounded(self) -> RunSpec:
        # (a benchmark workload ends when its prompts are served: `Scenario` checks the rest)
        if self.duration_s is not None and self.warmup_s >= self.duration_s:
            raise FieldError(
                ("warmup_s",),
                f"warmup_s ({self.warmup_s}) must be below duration_s ({self.duration_s}); "
                "shorten the warm-up or lengthen the run",
            )
        return self


def _pools(dep: Deployment | PdDeployment) -> list[tuple[str, Deployment]]:
    if isinstance(dep, PdDeployment):
        return [("prefill", dep.prefill), ("decode", dep.decode)]
    return [("", dep)]


def check_against_model(deployments: list[Deployment | PdDeployment], model: ModelSpec) -> None:
    """Raise FieldError (at `deployments[i]`, its pool and field) naming the deployment field
    that this model cannot run."""
    for i, dep in enumerate(deployments):
        for pool, d in _pools(dep):
            where = f"deployments[{i}] ({dep.name})" + (f".{pool}" if pool else "")
            loc: tuple[str | int, ...] = ("deployments", i, *((pool,) if pool else ()))
            check_deployment(model, d, where, loc)
            if d.mtp_draft_tokens and not d.mtp_acceptance:  # a run samples it; memory does not
                raise FieldError(
                    (*loc, "mtp_draft_tokens"),
                    f"{where}.mtp_draft_tokens={d.mtp_draft_tokens} needs mtp_acceptance "
                    "(per-position acceptance probabilities, e.g. [0.85])",
                )


def check_deployment(
    model: ModelSpec, d: Deployment, where: str = "", loc: tuple[str | int, ...] = ()
) -> None:
    """Raise FieldError naming the field of `d` (prefixed by `where` in the text, by `loc` in
    the error's location) this model cannot run."""
    at = f"{where}." if where else ""
    if model.num_heads % d.attn_tp:
        raise FieldError(
            (*loc, "attn_tp"),
            f"{at}attn_tp={d.attn_tp} does not divide {model.name}'s "
            f"{model.num_heads} attention heads; pick a divisor of {model.num_heads}",
        )
    n, extra = model.moe.n_routed_experts, d.eplb_redundant_experts
    if extra and (n + extra) % d.ep:
        fits = [r for r in range(d.ep - n % d.ep, 4 * d.ep + 1, d.ep) if r > 0][:3]
        raise FieldError(
            (*loc, "eplb_redundant_experts"),
            f"{at}eplb_redundant_experts={extra}: {n} + {extra} experts do not spread evenly "
            f"over EP{d.ep} (each GPU would hold {-(-(n + extra) // d.ep)}, as many as the next "
            f"even count); use one of {', '.join(map(str, fits))}",
        )
    if d.ep > n + extra:  # every EP rank holds at least one expert
        raise FieldError(
            (*loc, "moe_ep"),
            f"{at}moe_ep: EP{d.ep} is more GPUs than {model.name}'s {n} routed experts"
            f"{f' + {extra} redundant' if extra else ''} (each EP rank holds at least one); "
            f"use moe_tp for the rest or at most EP{n + extra}",
        )
    if d.dsa == "on" and model.dsa is None:
        raise FieldError(
            (*loc, "dsa"), f"{at}dsa='on' but {model.name} has no DSA indexer; use 'auto' or 'off'"
        )


def with_weights(dep: Any, native: str) -> Any:
    """`dep` (data or a spec) with `weight_dtype` set to `native` where it was not given."""
    if isinstance(dep, dict):
        if "prefill" in dep or "decode" in dep:
            return {k: with_weights(v, native) if k in ("prefill", "decode") else v
                    for k, v in dep.items()}  # fmt: skip
        return dep if "weight_dtype" in dep else {**dep, "weight_dtype": native}
    if isinstance(dep, PdDeployment):
        pools = {k: with_weights(getattr(dep, k), native) for k in ("prefill", "decode")}
        return dep.model_copy(update=pools)
    if isinstance(dep, Deployment) and "weight_dtype" not in dep.model_fields_set:
        return dep.model_copy(update={"weight_dtype": native})
    return dep


class Scenario(Spec):
    """Everything one run needs; `run_scenario(scenario)` turns it into `Results`."""

    name: str = Field(min_length=1, description="Study name, shown in tables and results.")
    description: str = Field(default="", description="What the study asks, in a sentence or two.")
    model: str = Field(description="Catalog model name ('deepseek-v3') or a config.json path.")
    gpu: str = Field(description="Catalog GPU name ('h200') or a GPU YAML path.")
    profile: str | None = Field(
        default=None,
        description="Calibration profile name or path (e.g. 'h800-published'). Omitted: the "
        "GPU's bundled '<gpu>-roofline' (efficiencies and launch cost derived from published "
        "kernels), or the bare datasheet for a GPU without one; 'datasheet': the bare datasheet "
        "roofline (efficiency 1, no launch cost).",
    )
    deployments: list[AnyDeployment] = Field(
        min_length=1, description="Layouts to compare; PD entries have prefill/decode keys."
    )
    workload: Workload = Field(
        description="Offered traffic, the same for every deployment (same seed: the same "
        "requests at the same times for an open loop or trace with run.duration_s; a closed "
        "loop shares the request lengths)."
    )
    slo: Slo = Field(description="Latency targets for goodput.")
    run: RunSpec = Field(description="Duration, warm-up and seed.")
    expect: list[str] = Field(
        default_factory=list, description="Claims checked by `mlasim check` (kept verbatim)."
    )
    probes: dict[str, Any] | None = Field(
        default=None, description="Cost-model facts `expect:` may use (read by `mlasim check`)."
    )
    golden: dict[str, Any] | None = Field(
        default=None, description="Golden-summary tolerances (read by `mlasim check`)."
    )

    @model_validator(mode="after")
    def _names_and_model(self) -> Scenario:
        seen: set[str] = set()
        for i, dep in enumerate(self.deployments):
            if not dep.name.isidentifier() or keyword.iskeyword(dep.name):
                fix = "".join(c if c.isalnum() else "_" for c in dep.name).lstrip("0123456789")
                raise FieldError(
                    ("deployments", i, "name"),
                    f"deployments[{i}].name={dep.name!r} is not a valid identifier (it is used "
                    f"in expect: expressions); use letters, digits and '_', e.g. {fix or 'dep'!r}",
                )
            if dep.name in seen:
                raise FieldError(
                    ("deployments", i, "name"),
                    f"deployments[{i}].name={dep.name!r} is used twice; give each a unique name",
                )
            seen.add(dep.name)
        run = self.run
        if run.duration_s is None and run.max_requests is None and not self._ends_itself():
            message = "give duration_s or max_requests (or both) so the run ends"
            raise FieldError(("run",), message, f"run: {message}")
        check_scenario_limits(self)
        return self

    def _ends_itself(self) -> bool:
        """A benchmark client stops once its prompts are served; other workloads never do."""
        return isinstance(self.workload, BenchmarkWorkload)

    def deployment(self, name: str) -> Deployment | PdDeployment:
        """The deployment called `name`; KeyError listing the known names otherwise."""
        for dep in self.deployments:
            if dep.name == name:
                return dep
        known = ", ".join(d.name for d in self.deployments)
        raise KeyError(f"no deployment {name!r}: known are {known}")
