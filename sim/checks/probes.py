"""Named cost-model facts a scenario's `expect:` lines can use next to simulation results.

Some claims are about the cost model itself, not about a run: which MLA path a policy picks for a
segment, the absorb/expand crossover, decode-attention arithmetic intensity, a GPU's ridge point.
A scenario states them declaratively in a `probes:` block; each entry has a `kind` from the
registry below and typed arguments, and its value (a number or a group of numbers) joins the
expectation namespace under the entry's name:

    probes:
      decode_8k: {kind: mla_path, model: deepseek-v3, policy: sglang, new_tokens: 1,
                  kv_tokens: 8192}
    expect:
      - decode_8k.absorb

Probes are data, never code: unknown kinds and fields are rejected with the known ones listed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, TypeAdapter, ValidationError

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile, scenario_profile_name
from sim.cost import dispatch, intensity, mla
from sim.specs.base import Spec
from sim.specs.limits import LimitError, check_data, current_limits
from sim.specs.model import ModelSpec

ProbeValue = float | bool | dict[str, Any]


class _ModelProbe(Spec):
    model: str = Field(description="Catalog model name, e.g. 'deepseek-v3'.")


class MlaPathProbe(_ModelProbe):
    """The path a dispatch policy picks for one request segment (alone in its batch)."""

    kind: Literal["mla_path"] = Field(description="Probe kind.")
    policy: str = Field(description="Dispatch policy: sglang, vllm or flops_optimal.")
    new_tokens: int = Field(ge=1, description="Tokens computed this step (q).")
    kv_tokens: int = Field(
        ge=1, description="Cached tokens after this step, new ones included (k)."
    )
    decode: bool | None = Field(
        default=None, description="Decode segment; default: true when new_tokens is 1."
    )
    sparse: bool | None = Field(
        default=None, description="DSA active; default: true when the model has an indexer."
    )


class MlaFlopsProbe(_ModelProbe):
    """Per-layer GFLOPs of both computations for q new tokens over a k-token cache."""

    kind: Literal["mla_flops"] = Field(description="Probe kind.")
    new_tokens: int = Field(ge=1, description="Tokens computed this step (q).")
    kv_tokens: int = Field(
        ge=1, description="Cached tokens after this step, new ones included (k)."
    )
    rope: bool = Field(default=True, description="Count the shared RoPE key (seed 002 omits it).")


class CrossoverProbe(_ModelProbe):
    """New-token count q* above which expand is cheaper than absorb, for a k-token cache."""

    kind: Literal["mla_crossover"] = Field(description="Probe kind.")
    kv_tokens: int = Field(ge=1, description="Cached tokens k.")


class DecodeIntensityProbe(_ModelProbe):
    """FLOP per HBM byte of decode attention with S query tokens per request (MTP verify)."""

    kind: Literal["decode_intensity"] = Field(description="Probe kind.")
    s_query: int = Field(
        default=1, ge=1, le=16, description="Query tokens per request, 1 + drafts."
    )
    kv_dtype: Literal["bf16", "fp8"] = Field(default="bf16", description="KV cache dtype.")


class GpuProbe(Spec):
    """Datasheet figures of a catalog GPU, and its BF16 ridge point."""

    kind: Literal["gpu"] = Field(description="Probe kind.")
    gpu: str = Field(description="Catalog GPU name, e.g. 'h200'.")


class StepCostProbe(_ModelProbe):
    """One lock-step step priced by the cost model: every attention rank runs the same kind of
    segments (decode by default), `requests_per_rank[r]` of them with `kv_tokens[r]` cached tokens
    each. A single value in either list applies to every rank. Values: `duration_s`,
    `rank_imbalance` (max/mean of the ranks' own time, all their own work), `overlap_saved_s`,
    and `ops.<op>` seconds (e.g. `ops.attn_decode`, `ops.dsa_indexer`, `ops.moe_routed`,
    `ops.ep_dispatch`)."""

    kind: Literal["step_cost"] = Field(description="Probe kind.")
    gpu: str = Field(description="Catalog GPU name, e.g. 'h200'.")
    deployment: dict[str, Any] = Field(
        description="Deployment fields (as in a scenario's deployments list; name optional)."
    )
    requests_per_rank: tuple[int, ...] = Field(
        min_length=1, description="Requests per attention rank (one value: every rank)."
    )
    kv_tokens: tuple[int, ...] = Field(
        min_length=1, description="Cached tokens per request, per rank (one value: every rank)."
    )
    new_tokens: int = Field(default=1, ge=1, description="Tokens per request this step.")
    decode: bool = Field(default=True, description="Decode/verify segments (else prefill/extend).")
    profile: str | None = Field(
        default=None,
        description="Calibration profile name or path, or 'datasheet' for the bare datasheet "
        "roofline; omitted: the scenario's `profile` (itself defaulting to the probe GPU's "
        "'<gpu>-roofline').",
    )


Probe = Annotated[
    MlaPathProbe | MlaFlopsProbe | CrossoverProbe | DecodeIntensityProbe | GpuProbe | StepCostProbe,
    Field(discriminator="kind"),
]
_PROBE_ADAPTER: TypeAdapter[Probe] = TypeAdapter(Probe)


def _mla_path(p: MlaPathProbe) -> ProbeValue:
    model = load_model(p.model)
    decode = p.new_tokens == 1 if p.decode is None else p.decode
    seg = dispatch.Segments(
        new_tokens=np.array([p.new_tokens], dtype=np.int64),
        kv_tokens=np.array([p.kv_tokens], dtype=np.int64),
        is_decode=np.array([decode]),
    )
    sparse = model.dsa is not None if p.sparse is None else p.sparse
    path = int(dispatch.choose_paths(p.policy, model, seg, sparse=sparse)[0])
    return {name: path == code for code, name in dispatch.PATH_NAMES.items()}


def _mla_model(p: _ModelProbe) -> ModelSpec:
    model = load_model(p.model)
    if model.attention != "mla":
        raise ValueError(f"model {p.model!r} uses {model.attention} attention, not MLA")
    return model


def _mla_flops(p: MlaFlopsProbe) -> ProbeValue:
    model = _mla_model(p)
    args = (model.mla_spec, p.new_tokens, p.kv_tokens)
    expand = float(mla.expand_flops(*args, heads=model.num_heads, rope=p.rope)) / 1e9
    absorb = float(mla.absorb_flops(*args, heads=model.num_heads, rope=p.rope)) / 1e9
    return {"expand_gflops": expand, "absorb_gflops": absorb}


def _crossover(p: CrossoverProbe) -> ProbeValue:
    return float(mla.crossover_q(_mla_model(p).mla_spec, p.kv_tokens))


def _intensity(p: DecodeIntensityProbe) -> ProbeValue:
    return intensity.model_decode_intensity(load_model(p.model), p.s_query, p.kv_dtype)


def _gpu(p: GpuProbe) -> ProbeValue:
    g = load_gpu(p.gpu)
    return {
        "ridge_flop_per_byte": g.ridge_flop_per_byte,
        "bf16_tflops": g.bf16_tflops,
        "fp8_tflops": g.fp8_tflops,
        "hbm_gb": g.hbm_gb,
        "hbm_tb_s": g.hbm_tb_s,
        "nvlink_gb_s": g.nvlink_gb_s,
        "nic_gb_s": g.nic_gb_s,
    }


def _field_errors(exc: ValidationError, field: str) -> str:
    """`field.sub: why; ...` for every error of a spec built from the probe's `field`."""
    return "; ".join(
        ".".join([field, *map(str, e["loc"])]) + ": " + e["msg"].removeprefix("Value error, ")
        for e in exc.errors()
    )


def _per_rank(values: tuple[int, ...], ranks: int, what: str) -> list[int]:
    if len(values) == 1:
        return list(values) * ranks
    if len(values) != ranks:
        raise ValueError(f"{what} has {len(values)} values for {ranks} attention ranks")
    return list(values)


def _step_cost(p: StepCostProbe) -> ProbeValue:
    from sim.cost.batch import BatchShape
    from sim.cost.serving import ServingCostModel
    from sim.specs.deployment import Deployment

    try:
        dep = Deployment.model_validate({"name": "probe", **p.deployment})
    except ValidationError as exc:  # pydantic's own text is a dump with a URL: say field and why
        raise ValueError(_field_errors(exc, "deployment")) from None
    ranks, lim = dep.attn_dp, current_limits()
    if dep.gpus > lim.max_gpus_per_unit:
        raise ValueError(
            f"deployment: {dep.gpus:,} GPUs in one unit, over the limit of "
            f"{lim.max_gpus_per_unit:,}; give a realistic layout"
        )
    counts = _per_rank(p.requests_per_rank, ranks, "requests_per_rank")
    if sum(counts) > lim.max_requests:
        raise ValueError(
            f"requests_per_rank: {sum(counts):,} requests in the step, over the limit of "
            f"{lim.max_requests:,}"
        )
    kv = _per_rank(p.kv_tokens, ranks, "kv_tokens")
    rank = np.repeat(np.arange(ranks, dtype=np.int64), counts)
    batch = BatchShape(
        num_ranks=ranks,
        rank=rank,
        new_tokens=np.full(rank.size, p.new_tokens, dtype=np.int64),
        kv_tokens=np.repeat(np.array(kv, dtype=np.int64), counts),
        is_decode=np.full(rank.size, p.decode),
    )
    gpu = load_gpu(p.gpu)
    name = scenario_profile_name(p.profile, gpu.name)
    profile = None if name is None else load_profile(name)
    measured_on = profile.device.gpu if profile is not None else None
    lender = load_gpu(measured_on) if measured_on and measured_on != gpu.name else None
    model = ServingCostModel(load_model(p.model), gpu, dep, profile, profile_gpu=lender)
    cost = model.step_cost(batch)
    return {
        "duration_s": cost.duration_s,
        "rank_imbalance": cost.rank_imbalance,
        "overlap_saved_s": cost.overlap_saved_s,
        "ops": {name: t.seconds for name, t in cost.ops.items()},
    }


PROBES: dict[str, Callable[[Any], ProbeValue]] = {
    "mla_path": _mla_path,
    "mla_flops": _mla_flops,
    "mla_crossover": _crossover,
    "decode_intensity": _intensity,
    "gpu": _gpu,
    "step_cost": _step_cost,
}


class ProbeError(ValueError):
    """A `probes:` entry is malformed or its cost-model call failed; `probe` names the entry."""

    def __init__(self, message: str, probe: str = "") -> None:
        super().__init__(message)
        self.probe = probe


def parse_probe(name: str, raw: Any) -> Probe:
    """Validate one `probes:` entry; the message names the probe, the field and the known kinds."""
    kind = raw.get("kind") if isinstance(raw, Mapping) else None
    if not isinstance(kind, str) or kind not in PROBES:  # a list or mapping is no kind either
        got = kind if isinstance(raw, Mapping) else type(raw).__name__
        raise ProbeError(
            f"probe {name!r}: unknown kind {got!r}; known kinds are {', '.join(sorted(PROBES))}",
            name,
        )
    _bounded(name, raw)
    try:
        return _PROBE_ADAPTER.validate_python(dict(raw))
    except ValidationError as exc:
        lines = [
            f"{'.'.join(str(x) for x in e['loc'][1:]) or 'kind'}: {e['msg']}" for e in exc.errors()
        ]
        raise ProbeError(f"probe {name!r} ({raw['kind']}): " + "; ".join(lines), name) from None


TOKEN_FIELDS = ("new_tokens", "kv_tokens", "requests_per_rank", "s_query")


def _bounded(name: str, raw: Mapping[str, Any]) -> None:
    """ProbeError for a probe over the input limits (`sim.specs.limits`): a count or length
    beyond `max_tokens`, or more per-rank values than a deployment has ranks, which would
    overflow numpy's int64 or allocate without bound."""
    lim = current_limits()
    try:
        check_data(dict(raw), limits=lim)
    except LimitError as exc:
        raise ProbeError(f"probe {name!r}: {exc}", name) from None
    for field in TOKEN_FIELDS:
        value = raw.get(field)
        values = value if isinstance(value, list | tuple) else [value]
        if len(values) > lim.max_total_ranks:
            raise ProbeError(
                f"probe {name!r}: {field} has {len(values):,} values, more than "
                f"{lim.max_total_ranks:,} ranks",
                name,
            )
        big = [v for v in values if isinstance(v, int | float) and v > lim.max_tokens]
        if big:
            raise ProbeError(
                f"probe {name!r}: {field}={big[0]:.4g} is over the limit of {lim.max_tokens:,}; "
                "give a realistic count",
                name,
            )


def compute_probes(
    raw: Mapping[str, Any] | None, default_profile: str | None = None
) -> dict[str, ProbeValue]:
    """Values of every probe in a scenario's `probes:` block, by name. `default_profile` (the
    scenario's `profile:`) prices step_cost probes that name no profile of their own."""
    out: dict[str, ProbeValue] = {}
    for name, entry in (raw or {}).items():
        probe = parse_probe(str(name), entry)
        if isinstance(probe, StepCostProbe) and probe.profile is None:
            probe = probe.model_copy(update={"profile": default_profile})
        try:
            out[str(name)] = PROBES[probe.kind](probe)
        except (ValueError, LookupError, ArithmeticError) as exc:  # OverflowError, ZeroDivision
            raise ProbeError(f"probe {name!r} ({probe.kind}): {exc}", str(name)) from None
    return out
