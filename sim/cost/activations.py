"""HBM one GPU keeps for activations: the largest prefill chunk's forward plus the decode graphs.

vLLM sizes this reserve by profiling one forward at its largest token budget
(`max_num_batched_tokens`) and keeping the peak it allocates; this module counts the same peak
from the shapes. A forward holds the hidden state and residual of every token, and, one layer
at a time, the larger of two transient stages:

- attention: the expanded prefill (MHA path) holds q and k (d_k + d_s per head), v and the
  output (d_v per head) of each token, BF16, for the GPU's heads;
- routed experts: the rows the GPU receives (tokens x top-k, times moe_tp / attn_tp as the
  unit's ranks outnumber its EP GPUs), each with its FP8 input, BF16 gate_up output, FP8
  activation and BF16 down output.

CUDA graphs replay from a private memory pool that holds the activations of the largest
batch they capture (PyTorch, "CUDA Graphs": graph memory pools), here the decode batch
(`max_running_requests` x (1 + draft tokens)), counted by the same rule. Workspaces of
individual kernels and the allocator's fragmentation are left out.
"""

from __future__ import annotations

from sim.specs.deployment import Deployment
from sim.specs.model import ModelSpec

BF16 = 2.0
FP8 = 1.0


def forward_activation_bytes(model: ModelSpec, d: Deployment, tokens: float) -> float:
    """Peak activation bytes on one GPU of a forward over `tokens` tokens per rank."""
    h = model.hidden_size
    stream = 2 * tokens * h * BF16  # hidden state and residual
    heads = model.num_heads / d.attn_tp
    if model.attention == "mla":
        m = model.mla_spec
        per_head = 2 * (m.qk_nope_head_dim + m.qk_rope_head_dim) + 2 * m.v_head_dim
    else:
        per_head = 4 * model.gqa_spec.head_dim
    attention = tokens * heads * per_head * BF16
    moe = model.moe
    experts = 0.0
    if moe.n_routed_experts:
        rows = tokens * moe.experts_per_token * d.moe_tp / d.attn_tp
        inter = moe.moe_intermediate_size / d.moe_tp
        experts = rows * (h * FP8 + 2 * inter * BF16 + inter * FP8 + h * BF16)
    return stream + max(attention, experts)


def activation_reserve_bytes(model: ModelSpec, d: Deployment) -> float:
    """What one GPU keeps for activations: `activation_reserve_gb` when the deployment sets
    it, else the largest prefill chunk's peak plus the decode graphs' pool."""
    if d.activation_reserve_gb is not None:
        return d.activation_reserve_gb * 1e9
    chunk = forward_activation_bytes(model, d, d.chunked_prefill_tokens)
    decode_tokens = d.max_running_requests * (1 + d.mtp_draft_tokens)
    return chunk + forward_activation_bytes(model, d, decode_tokens)
