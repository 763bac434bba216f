"""How one serving unit is laid out on GPUs, and the knobs engineers turn on it.

A unit is one EP group: `nodes x gpus_per_node` GPUs. Attention runs as `attn_dp` ranks of
`attn_tp` GPUs each (TP8 is one rank of 8 GPUs; DP8 attention is eight ranks of one GPU); the MoE
layers spread over the whole unit as `moe_ep x moe_tp`. All ranks of a unit step in lock-step.

Routers and MLA dispatch policies are named here, so a scenario is checked (and `mlasim schema`
lists the choices) before anything runs; `sim.engine.router.ROUTERS` and
`sim.cost.dispatch.policy_names()` implement exactly these names (a test holds them equal).
"""

from __future__ import annotations

import math
from typing import Any, Literal, get_args

from pydantic import (
    AliasChoices,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from sim.specs.base import FieldError, Spec

DType = Literal["bf16", "fp8"]
WeightDType = Literal["bf16", "fp8", "fp4"]
RouterName = Literal["round_robin", "least_tokens", "least_kv", "least_requests"]
MlaPolicyName = Literal["sglang", "vllm", "flops_optimal"]
EngineName = Literal["sglang", "vllm", "trtllm"]
ENGINE_NAMES: tuple[str, ...] = get_args(EngineName)
ROUTER_NAMES: tuple[str, ...] = get_args(RouterName)
MLA_POLICY_NAMES: tuple[str, ...] = get_args(MlaPolicyName)
PoolRole = Literal["prefill", "decode"]

# Default routing skew: the Zipf exponent whose busiest EP32 GPU (DeepSeek-V3, 256 experts,
# top-8, no EPLB) receives what it receives under aiconfigurator-core's default DeepSeek routing
# (`power_law` with alpha 1.01: per-expert loads drawn from a bounded power law, the heaviest
# EP group measured): 3.30x the mean GPU at 16K tokens per GPU. Its production-kernel table
# (systems/data/h200_sxm/moe/sglang/0.5.10/wideep_context_moe_perf.parquet, EP32, 524,288
# tokens) shows the same ratio in kernel time: 41.2 ms skewed against 12.7 ms balanced, 3.24x.
# docs/cost-model.md ("Expert skew") gives the derivation; 0 is even routing.
DEFAULT_EXPERT_ZIPF_EXPONENT = 0.77


def _divisors(g: int, most: int = 12) -> str:
    """The smallest divisors of `g` (for a message): O(sqrt g), so a huge unit answers at once."""
    small = [d for d in range(1, min(math.isqrt(g), 10**6) + 1) if g % d == 0]
    found = sorted({*small, *(g // d for d in small)})
    return ", ".join(map(str, found[:most])) + (", ..." if len(found) > most else "")


class Deployment(Spec):
    """One serving unit (colocated prefill and decode unless `role` says otherwise).

    `expert_zipf_exponent` is also accepted under its former name `expert_zipf_s`.
    """

    name: str = Field(description="Label used in tables and in `expect:` expressions.")
    nodes: int = Field(default=1, ge=1, description="Nodes in one unit.")
    gpus_per_node: int = Field(default=8, ge=1, description="GPUs per node.")
    replicas: int = Field(default=1, ge=1, description="Identical units behind one router.")
    engine: EngineName | None = Field(
        default=None,
        description="Serving engine this unit runs: 'sglang', 'vllm' or 'trtllm' (its "
        "production-kernel profile, scheduling defaults and overheads where the simulator has "
        "them). Omitted: the generic engine, priced by the scenario's profile.",
    )
    role: Literal["colocated", "prefill", "decode"] = Field(
        default="colocated",
        description="'colocated': prefill and decode on the same GPUs; 'prefill': requests end "
        "at their first token; 'decode': requests arrive with their prompt's KV in place (a PD "
        "pool measured alone). Inside a PD pair the pair sets it.",
    )
    attn_tp: int = Field(default=1, ge=1, description="GPUs sharing one attention rank (TP).")
    moe_ep: int | None = Field(
        default=None, ge=1, description="Expert-parallel size (default: all GPUs / moe_tp)."
    )
    moe_tp: int = Field(default=1, ge=1, description="Tensor-parallel size of each expert.")
    dense_ffn: Literal["tp", "dp", "unit"] = Field(
        default="tp",
        description="Dense MLP layers (the first dense layers): 'tp' (vLLM; SGLang's "
        "--moe-dense-tp-size 1 under DP attention) shards them over the attention TP group, so "
        "a DP-attention rank holds them whole; 'dp' replicates them; 'unit' (SGLang's default) "
        "shards them over all the unit's GPUs, which gather every rank's hidden states and "
        "scatter the summed outputs back in each dense layer.",
    )
    lm_head: Literal["rank", "unit"] = Field(
        default="rank",
        description="Where the output head lives: 'rank' (vLLM; SGLang's --enable-dp-lm-head) "
        "splits it over attention TP, so a DP-attention rank holds it whole; 'unit' (SGLang's "
        "default) splits the vocabulary over all the unit's GPUs, which gather every rank's "
        "sampled hidden states, compute their slice of the logits and all-gather the logits.",
    )
    weight_dtype: WeightDType = Field(default="fp8", description="GEMM weight dtype.")
    kv_dtype: DType = Field(
        default="bf16", description="KV cache dtype ('fp8' uses FlashMLA's 656 B layout)."
    )
    mtp_draft_tokens: int = Field(
        default=0,
        ge=0,
        le=8,
        description="MTP draft tokens verified per decode step (0 = off). A model "
        "that ships no MTP module (mtp_layers 0) drafts with an assumed one built as DeepSeek's "
        "are: one of the model's own MoE decoder layers plus a 2d -> d projection, whose weights "
        "and KV are counted.",
    )
    mtp_acceptance: tuple[float, ...] = Field(
        default=(),
        description="Per-position acceptance probability of each draft token, given all before "
        "it were accepted; one value is used for every position.",
    )
    dsa: Literal["auto", "on", "off"] = Field(
        default="auto", description="Sparse attention: 'auto' uses it when the model has DSA."
    )
    mla_policy: MlaPolicyName = Field(
        default="sglang",
        description="MLA path dispatch policy: 'sglang' and 'vllm' mimic those engines' rules, "
        "'flops_optimal' picks the cheaper path per request by FLOPs.",
    )
    two_batch_overlap: bool = Field(
        default=False,
        description="Split steps into two micro-batches to hide EP comms: only with EP, and only "
        "in steps where every busy rank decodes or every busy rank extends, as SGLang does; "
        "other steps run whole.",
    )
    eplb_redundant_experts: int = Field(
        default=0, ge=0, description="Redundant expert replicas placed by EPLB (0 = no EPLB)."
    )
    expert_zipf_exponent: float = Field(
        default=DEFAULT_EXPERT_ZIPF_EXPONENT,
        ge=0.0,
        le=3.0,
        validation_alias=AliasChoices("expert_zipf_exponent", "expert_zipf_s"),
        description="Zipf exponent of expert popularity; unitless. Default 0.77: the busiest "
        "EP32 GPU of DeepSeek-V3 gets what aiconfigurator-core's default routing (power law "
        "1.01) gives it, 3.3x the mean without EPLB; 0 = even routing (perfect balance).",
    )
    chunked_prefill_tokens: int = Field(
        default=8192,
        ge=64,
        description="Prefill token budget per rank per step. With engine 'trtllm' it is "
        "TensorRT-LLM's max_num_tokens (default 8192), shared by the step's generation and "
        "context tokens.",
    )
    chunked_prefill: bool = Field(
        default=True,
        description="Whether a prompt may be split over steps. False: a prompt joins a step "
        "only when it fits the step's token budget whole, and admission stops at the first that "
        "does not; a prompt longer than the budget is refused. TensorRT-LLM's own default is "
        "False (enable_chunked_prefill), launched with a max_num_tokens above the prompt "
        "length; the simulator keeps True for every engine, so a budget below a prompt does not "
        "refuse it.",
    )
    mixed_chunk: bool = Field(
        default=True,
        description="A rank's prefill chunks run in the same step as its decode requests "
        "(vLLM; SGLang's --enable-mixed-chunk). False (SGLang's default): a rank that prefills "
        "runs only its prefill that step and its decode requests wait.",
    )
    max_running_requests: int = Field(
        default=256,
        ge=1,
        description="Most requests a rank runs at once (SGLang's --max-running-requests, "
        "vLLM's max_num_seqs).",
    )
    decode_reserve_ratio: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Admission keeps KV pages free for this share of the output still to come "
        "of every request on the rank, the new one's included. 0 (vLLM): admit while the prompt "
        "fits and preempt when decode overflows; SGLang reserves a share it adapts between "
        "0.1 and 0.7 (new_token_ratio); 1 never preempts.",
    )
    page_size_tokens: int = Field(default=64, ge=1, description="KV page size.")
    mem_fraction: float = Field(
        default=0.9,
        gt=0.0,
        le=1.0,
        description="Share of device memory for weights + KV + activations, as vLLM's "
        "gpu_memory_utilization (default 0.9): activation_reserve_gb comes out of it. SGLang's "
        "--mem-fraction-static covers weights + KV only: to mimic it, set mem_fraction to it "
        "and activation_reserve_gb to 0.",
    )
    activation_reserve_gb: float | None = Field(
        default=None,
        ge=0.0,
        description="HBM (GB, 1e9 B) kept per GPU for activations, graphs and buffers. "
        "Omitted: sized from the largest prefill chunk's forward plus the decode CUDA graphs' "
        "pool (`sim.cost.activations`), as vLLM sizes it by profiling its largest batch.",
    )
    router: RouterName = Field(
        default="least_requests",
        description="Request router across DP ranks and replicas: 'round_robin', "
        "'least_tokens' (least work left: prefill + output tokens, with each request's true "
        "output length, which no real router knows: a best case), 'least_kv' (least KV in "
        "use + queued, what a real router sees) or 'least_requests' (fewest requests, a queued "
        "one counting four: vLLM's data-parallel balancing).",
    )

    @property
    def gpus(self) -> int:
        """GPUs in one unit."""
        return self.nodes * self.gpus_per_node

    @property
    def total_gpus(self) -> int:
        return self.gpus * self.replicas

    @property
    def attn_dp(self) -> int:
        """Attention ranks per unit (data-parallel attention)."""
        return self.gpus // self.attn_tp

    @property
    def ep(self) -> int:
        return self.moe_ep if self.moe_ep is not None else self.gpus // self.moe_tp

    @property
    def layout(self) -> str:
        """'attn TP4 x DP2, MoE EP8' (x replicas when more than one): what the name may not say."""
        moe = f"EP{self.ep}" + (f" x TP{self.moe_tp}" if self.moe_tp > 1 else "")
        rep = f" x{self.replicas}" if self.replicas > 1 else ""
        return f"attn TP{self.attn_tp} x DP{self.attn_dp}, MoE {moe}{rep}"

    @property
    def mtp_probs(self) -> tuple[float, ...]:
        """Acceptance probability for each of the draft positions."""
        if self.mtp_draft_tokens == 0:
            return ()
        if len(self.mtp_acceptance) == 1:
            return self.mtp_acceptance * self.mtp_draft_tokens
        return self.mtp_acceptance

    @model_serializer(mode="wrap")
    def _unset_weights_stay_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        """A deployment that leaves `weight_dtype` out serves the checkpoint's own weights
        (`sim.io.resolve` spells them out): its dump leaves it out too, so a scenario rebuilt
        from a dump (a sweep point, a capacity probe, a worker's copy) still serves them."""
        data = handler(self)
        if "weight_dtype" not in self.model_fields_set and isinstance(data, dict):
            data.pop("weight_dtype", None)
        return data

    @model_validator(mode="after")
    def _check_layout(self) -> Deployment:
        g = self.gpus
        unit = f"{self.nodes} node{'s' * (self.nodes > 1)} of {self.gpus_per_node}"
        if g % self.attn_tp:
            raise FieldError(
                ("attn_tp",),
                f"attn_tp={self.attn_tp} must divide the unit's {g} GPUs ({unit}); "
                f"pick a divisor of {g}",
            )
        if self.attn_tp > self.gpus_per_node:
            raise FieldError(
                ("attn_tp",),
                f"attn_tp={self.attn_tp} spans more than one node ({self.gpus_per_node} GPUs): "
                "keep attention TP inside a node",
            )
        if g % self.moe_tp:
            raise FieldError(
                ("moe_tp",),
                f"moe_tp={self.moe_tp} must divide the unit's {g} GPUs ({unit}); pick one of "
                f"{_divisors(g)}",
            )
        if self.ep * self.moe_tp != g:
            raise FieldError(
                ("moe_ep",),
                f"moe_ep x moe_tp = {self.ep} x {self.moe_tp} = {self.ep * self.moe_tp} must equal "
                f"the unit's {g} GPUs; set moe_ep={g // self.moe_tp} or leave it out",
            )
        if self.mtp_draft_tokens and len(self.mtp_acceptance) not in (1, self.mtp_draft_tokens):
            raise FieldError(
                ("mtp_acceptance",),
                f"mtp_acceptance has {len(self.mtp_acceptance)} values for "
                f"mtp_draft_tokens={self.mtp_draft_tokens}: give one value or one per draft token",
            )
        if any(not 0.0 <= p <= 1.0 for p in self.mtp_acceptance):
            message = "mtp_acceptance values are probabilities: each must be in [0, 1]"
            raise FieldError(("mtp_acceptance",), message)
        return self


class PdDeployment(Spec):
    """Prefill/decode disaggregation: two pools, KV moving over RDMA after prefill."""

    name: str = Field(description="Label used in tables and in `expect:` expressions.")
    prefill: Deployment = Field(
        description="The prefill pool; its role is set to 'prefill' (leave `role` out)."
    )
    decode: Deployment = Field(
        description="The decode pool; its role is set to 'decode' (leave `role` out)."
    )
    kv_transfer_gb_s: float | None = Field(
        default=None,
        gt=0,
        description="KV transfer bandwidth of each prefill attention rank's link, GB/s "
        "(default: one GPU's NIC).",
    )

    @model_validator(mode="before")
    @classmethod
    def _pool_roles(cls, data: Any) -> Any:
        """Each pool takes its role from its place in the pair. A pool that leaves `role` out
        or says 'colocated' (a unit's default, as when a unit is turned into a pair) gets it;
        the other pool's role is an error, never silently ignored."""
        if not isinstance(data, dict):
            return data
        out = dict(data)
        pools: tuple[PoolRole, ...] = ("prefill", "decode")
        for pool in pools:
            d = out.get(pool)
            role = d.get("role") if isinstance(d, dict) else getattr(d, "role", None)
            if role not in (None, "colocated", pool):
                message = (
                    f"the {pool} pool of a PD pair always has role {pool!r}; remove the role key"
                )
                raise FieldError((pool,), f"{pool}.role={role!r}: {message}")
            if isinstance(d, dict):
                out[pool] = {**d, "role": pool}
            elif isinstance(d, Deployment):
                out[pool] = d.model_copy(update={"role": pool})
        return out

    @property
    def layout(self) -> str:
        """Both pools' layouts: 'P: attn TP1 x DP8, MoE EP8 | D: ...'."""
        return f"P: {self.prefill.layout} | D: {self.decode.layout}"

    @property
    def total_gpus(self) -> int:
        return self.prefill.total_gpus + self.decode.total_gpus
