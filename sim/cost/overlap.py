"""Two-batch overlap as a schedule: two micro-batches on a compute stream and a comm stream.

Each MoE layer runs, per micro-batch b: attention and the rank's own work A_b, then the expert
dispatch D_b, the routed experts M_b, the combine C_b; the next layer's A_b waits for C_b. The
compute stream runs A1, A2, M1, M2 and the communication stream D1, D2, C1, C2, each in order;
an op starts when its stream is free and its input is ready. The step lasts until the last
combine of the last layer. With compute and communication balanced this approaches
max(compute, comm); when one side dominates it approaches that side plus the other's exposed part.
"""

from __future__ import annotations

# DeepEP's normal (prefill) kernels keep 20 of an H800's 132 SMs busy moving data, so compute
# that overlaps them runs on the rest; its low-latency (decode) kernels use a hook-based receive
# that holds no SMs (deepseek-ai/DeepEP README; DeepSeek-V3 paper: 20 SMs saturate IB + NVLink).
NORMAL_KERNEL_SM_SHARE = 20 / 132


EXACT_LAYERS = 6  # the schedule is periodic (period <= 2 layers) well before this


def two_batch_step(
    attn_s: float, dispatch_s: float, moe_s: float, combine_s: float, layers: int
) -> float:
    """Makespan of `layers` MoE layers, each op time given per micro-batch per layer.

    The schedule is a max-plus recurrence that settles into a repeating pattern within a few
    layers: the first EXACT_LAYERS are scheduled op by op and the rest extrapolated by the
    two-layer period (equal to the full schedule to rounding; a test checks it).
    """
    if layers <= EXACT_LAYERS:
        return _schedule(attn_s, dispatch_s, moe_s, combine_s, layers)
    before = _schedule(attn_s, dispatch_s, moe_s, combine_s, EXACT_LAYERS - 2)
    last = _schedule(attn_s, dispatch_s, moe_s, combine_s, EXACT_LAYERS)
    return last + (layers - EXACT_LAYERS) * (last - before) / 2


def _schedule(
    attn_s: float, dispatch_s: float, moe_s: float, combine_s: float, layers: int
) -> float:
    """Op-by-op list schedule of the two micro-batches over `layers` layers."""
    compute_free = comm_free = 0.0
    ready = [0.0, 0.0]  # when each micro-batch's previous combine finished
    for _ in range(layers):
        a_end = [0.0, 0.0]
        for b in (0, 1):
            compute_free = max(compute_free, ready[b]) + attn_s
            a_end[b] = compute_free
        d_end = [0.0, 0.0]
        for b in (0, 1):
            comm_free = max(comm_free, a_end[b]) + dispatch_s
            d_end[b] = comm_free
        m_end = [0.0, 0.0]
        for b in (0, 1):
            compute_free = max(compute_free, d_end[b]) + moe_s
            m_end[b] = compute_free
        for b in (0, 1):
            comm_free = max(comm_free, m_end[b]) + combine_s
            ready[b] = comm_free
    return max(ready)
