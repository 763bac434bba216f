"""Two-batch overlap as a schedule: two micro-batches on a compute stream and a comm stream.

Each MoE layer runs, per micro-batch b: attention and the rank's own work A_b, then the expert
dispatch D_b, the routed experts M_b, the combine C_b; the next layer's A_b waits for C_b. The
compute stream runs A1, A2, M1, M2 and the communication stream D1, D2, C1, C2, each in order;
an op starts when its stream is free and its input is ready. The step lasts until the last
combine of the last layer. With compute and communication balanced this approaches
max(compute, comm); when one side dominates it approaches that side plus the other's exposed part.
The micro-batches need not be equal: a rank that cannot split (one decode request) runs all its
work in the second, as SGLang's split of one request gives an empty first micro-batch.

Only the MoE layers are split, as in SGLang (`two_batch_overlap.py` splits the layers from the
first MoE layer on): the first dense layers, the output head and the MTP draft run once per
step over the whole batch, before or after the overlapped layers.

DeepEP's low-latency kernels (decode) run with a receive hook on the compute stream: both
micro-batches share one CUDA stream, on which each dispatch and combine issues a send kernel
and later a receive kernel; only the network transfer between them is off the stream. Their SM
time therefore sits on the compute stream (`Stage.send_s`, `Stage.recv_s`), and the rest of the
published exchange latency is the transfer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.cost.batch import BatchShape, OpTime
from sim.cost.comm_ops import CommLoad, micro_batch_loads, unit_comm_ops
from sim.cost.elementwise import routed_elementwise
from sim.cost.layer_ops import RankSegments
from sim.cost.pricing import ZERO, Pricer, combine, log_bucket
from sim.specs.deployment import Deployment
from sim.specs.gpu import GpuSpec
from sim.specs.model import ModelSpec

# DeepEP's normal (prefill) kernels keep SMs busy moving data, so compute that overlaps them
# runs on the rest. DeepEP's README configures its inference-prefill example with
# `Buffer.set_num_sms(24)` (of an H800's 132), more than the 20 SMs the DeepSeek-V3 paper says
# saturate IB + NVLink: under overlap the GEMMs keep 108 SMs. No kernel-level timing of the
# normal kernels under overlap is published (deepseek-ai/profile-data's prefill trace is a
# Chrome trace, not tabulated; aiconfigurator-core's DeepEP normal tables are isolated
# intranode runs), so their bandwidth stays at the README's isolated figures.
NORMAL_KERNEL_SM_SHARE = 24 / 132

# DeepEP low-latency kernels in hook mode, per dispatch or combine of one micro-batch, on the
# compute stream: the send kernel (17-19 us) and the receive hook's own work (17 us, the
# shortest hook in the trace: longer hooks, up to 86 us, are waiting for data still in flight,
# which the schedule models by the transfer's end). Kernel durations of `dispatch_ll` /
# `combine_ll` in DeepSeek's decode trace (deepseek-ai/profile-data decode.json: EP128,
# 128 requests per GPU in two micro-batches of 64 tokens, one stream), as read in issue #22.
# Both kernels work per token (the send casts and posts each token's copies, the receive
# unpacks or reduces each received copy), so away from the trace's 64 tokens per rank their
# time is taken in proportion to the micro-batch's tokens per rank: an assumption, as no
# other size is published.
LOW_LATENCY_SEND_S = 18e-6
LOW_LATENCY_RECV_S = 17e-6
LOW_LATENCY_TRACE_TOKENS = 64


# rank ops that run once per step whatever the layers (not split by two-batch overlap)
_ONCE_PER_STEP = frozenset({"dense_mlp", "lm_head", "mtp_draft", "mtp_prefill"})
_MOE_LAYER_OPS = frozenset({"moe_gate", "moe_shared"})


def moe_layer_share(model: ModelSpec, op: str) -> float:
    """Share of a rank op's step time spent in the MoE layers (what two-batch overlap
    splits): all of the router and shared experts, none of the dense MLP, the head and the
    MTP passes, and moe_layers / num_layers of every per-layer op (attention, elementwise,
    TP all-reduce)."""
    if op in _MOE_LAYER_OPS:
        return 1.0
    if op in _ONCE_PER_STEP:
        return 0.0
    return model.moe_layers / model.num_layers


EXACT_LAYERS = 6  # the schedule is periodic (period <= 2 layers) well before this


@dataclass(frozen=True)
class Stage:
    """One micro-batch's op times per MoE layer: its attention and rank work, the expert
    dispatch, the routed experts, the combine."""

    attn_s: float
    dispatch_s: float
    moe_s: float
    combine_s: float
    send_s: float = 0.0  # compute-stream time of each exchange's send kernel
    recv_s: float = 0.0  # compute-stream time of each exchange's receive kernel


def two_batch_step(
    attn_s: float, dispatch_s: float, moe_s: float, combine_s: float, layers: int
) -> float:
    """Makespan of `layers` MoE layers of two equal micro-batches, each op time given per
    micro-batch per layer."""
    same = Stage(attn_s, dispatch_s, moe_s, combine_s)
    return micro_batch_step(same, same, layers)


def micro_batch_step(first: Stage, second: Stage, layers: int) -> float:
    """Makespan of `layers` MoE layers of two micro-batches.

    The schedule is a max-plus recurrence that settles into a repeating pattern within a few
    layers: the first EXACT_LAYERS are scheduled op by op and the rest extrapolated by the
    two-layer period (equal to the full schedule to rounding; a test checks it).
    """
    if layers <= EXACT_LAYERS:
        return _schedule(first, second, layers)
    before = _schedule(first, second, EXACT_LAYERS - 2)
    last = _schedule(first, second, EXACT_LAYERS)
    return last + (layers - EXACT_LAYERS) * (last - before) / 2


def _schedule(first: Stage, second: Stage, layers: int) -> float:
    """Op-by-op list schedule of the two micro-batches over `layers` layers. A send kernel
    runs on the compute stream right after the op that feeds its exchange, a receive kernel
    once the exchange's transfer has landed, before the op that reads it."""
    batches = (first, second)
    compute_free = comm_free = 0.0
    ready = [0.0, 0.0]  # when each micro-batch's previous combine landed
    recv_first = False  # the first layer has no combine to receive
    for _ in range(layers):
        a_end = [0.0, 0.0]
        for b, mb in enumerate(batches):
            compute_free = max(compute_free, ready[b]) + (mb.recv_s if recv_first else 0.0)
            compute_free += mb.attn_s + mb.send_s
            a_end[b] = compute_free
        d_end = [0.0, 0.0]
        for b, mb in enumerate(batches):
            comm_free = max(comm_free, a_end[b]) + mb.dispatch_s
            d_end[b] = comm_free
        m_end = [0.0, 0.0]
        for b, mb in enumerate(batches):
            compute_free = max(compute_free, d_end[b]) + mb.recv_s + mb.moe_s + mb.send_s
            m_end[b] = compute_free
        for b, mb in enumerate(batches):
            comm_free = max(comm_free, m_end[b]) + mb.combine_s
            ready[b] = comm_free
        recv_first = True
    for b, mb in enumerate(batches):  # the last combine's receive
        if mb.recv_s > 0:
            compute_free = max(compute_free, ready[b]) + mb.recv_s
            ready[b] = compute_free
    return max(ready)


def comm_time(ops: dict[str, OpTime]) -> float:
    """EP communication in a step: what two-batch overlap can hide."""
    return sum(ops[n].seconds for n in ("ep_dispatch", "ep_combine") if n in ops)


class TwoBatchOverlap:
    """What two-batch overlap saves in a step: mixed into `sim.cost.serving.ServingCostModel`,
    whose rank and routed-expert pricing (the hooks below) it reuses and whose memos it fills.
    """

    model: ModelSpec
    deployment: Deployment
    gpu: GpuSpec
    pricer: Pricer
    _unit_memo: dict[tuple[object, ...], dict[str, OpTime]]
    _micro_memo: dict[tuple[int, ...], tuple[float, float]]

    def _segments(self, batch: BatchShape, sel: np.ndarray) -> RankSegments:
        raise NotImplementedError

    def _rank_ops(self, s: RankSegments) -> dict[str, OpTime]:
        raise NotImplementedError

    def _routed_moe(self, unit_tokens: float, decode_only: bool) -> OpTime:
        raise NotImplementedError

    def _overlap_saving(
        self,
        batch: BatchShape,
        load: CommLoad,
        crit: int,
        rank_s: np.ndarray,
        tokens_r: np.ndarray,
        unit_ops: dict[str, OpTime],
        crit_ops: dict[str, OpTime],
    ) -> float:
        """Time two micro-batches save (negative when splitting costs more than it hides).

        Only the MoE layers are split (`moe_layer_share`): the critical rank's dense layers,
        head and MTP passes (`crit_ops`) run once, whole. In the MoE layers each rank splits
        its work in two (`_micro_batch_rank_s`), except a rank that cannot (one decode
        request, or a one-token chunk): SGLang splits it into an empty micro-batch and a whole
        one, so all its work and tokens go to the second. A micro-batch's rank work is the
        largest part of a splitting rank, or a whole rank's work if that is longer. The routed
        experts and the communication are re-priced for each micro-batch's tokens (the expert
        weights are read twice; each exchange is again set by its busiest sender or
        receiver), and the two are scheduled layer by layer on a compute and a communication
        stream (`micro_batch_step`), with the low-latency kernels' send and receive on the
        compute stream. With no rank splitting, nothing is hidden or added.
        """
        n_r = np.bincount(batch.rank, minlength=batch.num_ranks)
        whole = np.zeros(batch.num_ranks, dtype=bool)
        if (n_r == 1).any():
            unsplit = (n_r[batch.rank] == 1) & (batch.is_decode | (batch.new_tokens < 2))
            whole[batch.rank[unsplit]] = True
        split = (n_r > 0) & ~whole
        if not split.any():
            return 0.0
        # a micro-batch lasts as long as its slowest rank's part. Decode ranks' parts follow
        # their whole work (the slowest one's are the largest); a prefill rank's need not
        # (each part of a chunk reads its whole prefix), so each is priced
        has_prefill = np.zeros(batch.num_ranks, dtype=bool)
        if not load.decode_only:
            has_prefill[batch.rank[~batch.is_decode]] = True
        candidates = np.flatnonzero(split & has_prefill).tolist()
        if (split & ~has_prefill).any():
            candidates.append(int(np.argmax(np.where(split & ~has_prefill, rank_s, -1.0))))
        parts = [self._micro_batch_rank_s(batch, r) for r in candidates]
        attn = [max(p[0] for p in parts), max(p[1] for p in parts)]
        if whole.any():  # the slowest whole rank's MoE layers, all in the second
            r = int(np.argmax(np.where(whole, rank_s, -1.0)))
            attn[1] = max(
                attn[1], self._moe_layers_s(self._rank_ops(self._segments(batch, batch.rank == r)))
            )
        m, decode_only = self.model, load.decode_only
        layers = m.moe_layers
        # compute sharing SMs with DeepEP's normal kernels runs on the SMs they leave free
        slow = 1.0 if decode_only else 1.0 / (1.0 - NORMAL_KERNEL_SM_SHARE)
        stages = []
        micro = micro_batch_loads(load, batch, tokens_r, crit, whole)
        for a, part in zip(attn, micro, strict=True):
            ops = self._micro_unit_ops(part)
            moe, comm = ops["moe_routed"].seconds * slow, (ops["ep_dispatch"], ops["ep_combine"])
            dispatch, combine_s = (t.seconds / layers for t in comm)
            send = recv = 0.0
            if decode_only and dispatch + combine_s > 0:  # hook-mode kernels on the compute stream
                per_rank = part.sender_tokens / self.deployment.attn_tp / LOW_LATENCY_TRACE_TOKENS
                send, recv = LOW_LATENCY_SEND_S * per_rank, LOW_LATENCY_RECV_S * per_rank
                dispatch, combine_s = (max(t - send - recv, 0.0) for t in (dispatch, combine_s))
            stages.append(Stage(a / layers * slow, dispatch, moe, combine_s, send, recv))
        once = float(rank_s[crit]) - self._moe_layers_s(crit_ops)  # dense layers, head, MTP
        overlapped = once + micro_batch_step(stages[0], stages[1], layers)
        moe_serial = unit_ops["moe_routed"].seconds + unit_ops["moe_elementwise"].seconds
        return float(rank_s[crit]) + moe_serial + comm_time(unit_ops) - overlapped

    def _moe_layers_s(self, ops: dict[str, OpTime]) -> float:
        """A rank's time in its MoE layers: what two-batch overlap splits."""
        return sum(t.seconds * moe_layer_share(self.model, name) for name, t in ops.items())

    def _micro_unit_ops(self, load: CommLoad) -> dict[str, OpTime]:
        """One micro-batch's routed experts (one layer, with their SiLU, which runs between up
        and down) and its communication (every layer), memoised like `_unit_ops`."""
        key = ("micro", load.decode_only, *load.key())
        hit = self._unit_memo.get(key)
        if hit is None:
            m, d, pr, n = self.model, self.deployment, self.pricer, load.unit_tokens
            gemms = self._routed_moe(n, load.decode_only)
            act = routed_elementwise(pr, m, d, n, load.decode_only, load.sender_tokens)
            hit = {"moe_routed": combine(gemms, act)}
            hit.update(unit_comm_ops(pr, m, d, self.gpu, load))
            hit.setdefault("ep_dispatch", ZERO)
            hit.setdefault("ep_combine", ZERO)
            self._unit_memo[key] = hit
        return hit

    def _micro_batch_rank_s(self, batch: BatchShape, rank: int) -> tuple[float, float]:
        """A rank's own work in the MoE layers of each of its two micro-batches
        (`RankSegments.split_in_two`), each priced on its own, per step. At decode batch sizes
        a micro-batch's projection GEMMs read the same weights for half the tokens, so it
        costs more than half; at
        prefill sizes (compute-bound) about half, plus its launches. Decode-only ranks are
        memoised like whole decode ranks."""
        sel = batch.rank == rank
        if not bool(batch.is_decode[sel].all()):
            return self._parts_s(self._segments(batch, sel))
        k = batch.kv_tokens[sel]
        order = np.argsort(k, kind="stable")
        halves = [order[0::2], order[1::2]]
        key: tuple[int, ...] = (int(batch.new_tokens[sel].max()),)
        for idx in halves:
            key += (len(idx), log_bucket(float(k[idx].sum())))
        hit = self._micro_memo.get(key)
        if hit is None:
            hit = self._parts_s(self._segments(batch, sel))
            if len(self._micro_memo) > 100_000:
                self._micro_memo.clear()
            self._micro_memo[key] = hit
        return hit

    def _parts_s(self, s: RankSegments) -> tuple[float, float]:
        a, b = (self._moe_layers_s(self._rank_ops(p)) for p in s.split_in_two())
        return a, b
