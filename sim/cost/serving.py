"""Step cost of one deployment: the lock-step unit's forward time for an actual batch.

A step lasts as long as the slowest attention rank's attention + dense work, plus the unit-wide
routed-expert time on the busiest EP GPU, plus communication (TP all-reduce, EP dispatch and
combine). Two-batch overlap splits the step into two micro-batches so one's EP communication hides
behind the other's compute. Every op carries the source of its time.
"""

from __future__ import annotations

import math

import numpy as np

from sim.cost.batch import BatchShape, OpTime, StepCost
from sim.cost.calibrated import CalibratedCost, check_model
from sim.cost.comm_ops import (
    CommLoad,
    comm_loads,
    draft_comm,
    layer_comm_ops,
    tp_allreduce,
    unit_comm_ops,
)
from sim.cost.dense import unit_dense_ops
from sim.cost.dispatch import Segments, choose_paths
from sim.cost.elementwise import draft_elementwise, rank_elementwise, routed_elementwise
from sim.cost.head import sampled_rows, unit_head
from sim.cost.layer_ops import (
    RankContext,
    RankSegments,
    ffn_rank_ops,
    gemm,
    gqa_layer,
    linear_attention_layer,
    mla_layer,
)
from sim.cost.memory import dsa_active, kv_bytes_per_token, kv_bytes_per_token_layer, plan_memory
from sim.cost.overheads import engine_overheads
from sim.cost.overlap import TwoBatchOverlap, comm_time
from sim.cost.pricing import Pricer, combine, scale, total_seconds
from sim.cost.roofline import OpEstimator, RooflineCost
from sim.cost.routed import routed_gemms
from sim.specs.deployment import Deployment
from sim.specs.gpu import GpuSpec
from sim.specs.model import ModelSpec
from sim.specs.profile import Profile


class ServingCostModel(TwoBatchOverlap):
    """Prices steps of one deployment (model x GPU x layout), from a profile or the roofline."""

    def __init__(
        self,
        model: ModelSpec,
        gpu: GpuSpec,
        deployment: Deployment,
        profile: Profile | None = None,
        estimator: OpEstimator | None = None,
        profile_gpu: GpuSpec | None = None,
    ) -> None:
        """`profile_gpu`: the GPU the profile was measured on, when it is not `gpu` (its
        efficiencies then scale `gpu`'s roofline and every table estimate is marked
        extrapolated)."""
        d = deployment
        self.model, self.gpu, self.deployment = model, gpu, d
        self.memory = plan_memory(model, gpu, d)
        self.sparse = dsa_active(model, d)
        fallback = attention_fallback = RooflineCost(gpu)
        self.overheads = engine_overheads(d)
        if estimator is None and profile is not None:
            if model.attention == "mla":
                check_model(profile, model)
            estimator = CalibratedCost(profile, gpu, profile_gpu)
            r = profile.roofline
            # an engine replays its decode steps from CUDA graphs: kernels pay the measured
            # replay gap, not the profile's residual (`sim.cost.overheads`)
            launch_s = r.launch_overhead_us.value * 1e-6
            if self.overheads is not None:
                launch_s = self.overheads.launch_overhead_s()
            fallback, attention_fallback = (
                RooflineCost(
                    gpu,
                    compute_efficiency=e.value,
                    memory_efficiency=r.memory_bandwidth_efficiency.value,
                    launch_overhead_s=launch_s,
                )
                for e in (r.gemm_compute_efficiency, r.attention_compute_efficiency)
            )
        self.profile_name = profile.name if profile else f"{gpu.name} datasheet roofline"
        self.pricer = Pricer(
            gpu,
            estimator or fallback,
            mla_spec=model.mla if model.attention == "mla" else None,
            fallback=fallback,
            attention_fallback=attention_fallback,
        )
        self.ctx = RankContext(
            model=model,
            heads=model.num_heads // d.attn_tp,
            tp=d.attn_tp,
            moe_tp=d.moe_tp,
            # `unit`: the dense MLP is unit-wide work (`sim.cost.dense`); its SiLU, over the
            # gathered rows at 1/GPUs of the width, is a rank's rows at 1/attn_tp
            dense_split=1 if d.dense_ffn == "dp" else d.attn_tp,
            weight_dtype=d.weight_dtype,
            kv_dtype=d.kv_dtype,
            kv_bytes_layer=kv_bytes_per_token_layer(model, d.kv_dtype, sparse=self.sparse),
            topk=model.dsa.index_topk if (self.sparse and model.dsa) else 0,
            chunk_tokens=d.chunked_prefill_tokens,
            topk_in_indexer=_indexer_times_topk(profile),
        )
        self._decode_memo: dict[tuple[int, ...], tuple[float, dict[str, OpTime]]] = {}
        self._unit_memo: dict[tuple[object, ...], dict[str, OpTime]] = {}
        self._micro_memo: dict[tuple[int, ...], tuple[float, float]] = {}

    # -- memory facts the engine and results need ---------------------------------------------
    @property
    def kv_capacity_tokens_per_rank(self) -> int:
        return self.memory.kv_capacity_tokens_per_rank

    @property
    def kv_bytes_per_token(self) -> float:
        return kv_bytes_per_token(self.model, self.deployment)

    @property
    def state_tokens_per_request(self) -> int:
        per_gpu = self.memory.state_bytes_per_request_per_gpu
        return math.ceil(per_gpu / self.memory.kv_bytes_per_token_per_gpu) if per_gpu else 0

    # -- step pricing ------------------------------------------------------------------------
    def step_cost(self, batch: BatchShape) -> StepCost:
        ranks = batch.num_ranks
        if batch.size == 0:
            return StepCost(duration_s=0.0, rank_attention_s=np.zeros(ranks))
        rank, dec = batch.rank, batch.is_decode
        n_r = np.bincount(rank, minlength=ranks)
        new = batch.new_tokens
        tokens_r: np.ndarray
        if int(new.min()) == int(new.max()):  # uniform verify width: no weighted count needed
            tokens_r = n_r * float(new[0])  # float array
        else:
            tokens_r = np.bincount(rank, weights=new.astype(np.float64), minlength=ranks)
        rank_s = np.zeros(ranks)
        rank_ops: dict[int, dict[str, OpTime]] = {}
        mixed = np.zeros(ranks, dtype=bool)
        if not dec.all():
            mixed[rank[~dec]] = True
            for r in np.flatnonzero(mixed):  # ranks running prefill chunks: priced exactly
                rank_ops[int(r)] = self._rank_ops(self._segments(batch, rank == r))
                rank_s[r] = total_seconds(rank_ops[int(r)])
        busy_decode = ~mixed & (n_r > 0)
        if busy_decode.any():  # decode-only ranks: memoised by (batch, S, context sums)
            self._price_decode_ranks(batch, busy_decode, n_r, rank_s, rank_ops)
        crit = int(np.argmax(rank_s))
        if crit not in rank_ops:  # ties: a decode rank priced alike
            crit = max(rank_ops, key=lambda r: rank_s[r])
        mtp = self.deployment.mtp_draft_tokens > 0
        load, draft, extend = comm_loads(batch, tokens_r, crit, mtp=mtp)
        unit_ops = self._unit_ops(load, draft, extend)
        ops = {**rank_ops[crit], **unit_ops}
        if self.deployment.lm_head == "unit":
            ops.update(self._unit_head(batch))
        duration = sum(t.seconds for t in ops.values())
        saved = 0.0
        # SGLang splits a step into two micro-batches only when every busy DP rank runs the same
        # forward mode: all extend (a prefill chunk, decode requests alongside or not) or all
        # decode; a step where some ranks prefill while others decode runs whole
        modes_agree = not (mixed.any() and busy_decode.any())
        if self.deployment.two_batch_overlap and modes_agree and comm_time(unit_ops) > 0:
            saved = self._overlap_saving(
                batch, load, crit, rank_s, tokens_r, unit_ops, rank_ops[crit]
            )
            duration -= saved
        return StepCost(
            duration_s=duration, rank_attention_s=rank_s, ops=ops, overlap_saved_s=saved
        )

    def _segments(self, batch: BatchShape, sel: np.ndarray) -> RankSegments:
        """One rank's segments with the MLA path its own forward batch dispatches to."""
        q, k, dec = batch.new_tokens[sel], batch.kv_tokens[sel], batch.is_decode[sel]
        if self.model.attention == "mla":
            seg = Segments(new_tokens=q, kv_tokens=k, is_decode=dec)
            policy, heads = self.deployment.mla_policy, self.ctx.heads
            paths = choose_paths(policy, self.model, seg, sparse=self.sparse, heads=heads)
        else:
            paths = np.zeros(len(q), dtype=np.int8)
        samples = None if batch.samples_token is None else batch.samples_token[sel]
        return RankSegments(
            q=q.astype(np.float64),
            k=k.astype(np.float64),
            is_decode=dec,
            path=paths,
            samples=samples,
        )

    def _price_decode_ranks(
        self,
        batch: BatchShape,
        busy: np.ndarray,
        n_r: np.ndarray,
        rank_s: np.ndarray,
        rank_ops: dict[int, dict[str, OpTime]],
    ) -> None:
        """Price decode-only ranks. Ranks with the same batch size, verify width and context sums
        (to 2^(1/16)) share one pricing, memoised across steps."""
        ranks, rank = batch.num_ranks, batch.rank
        k = batch.kv_tokens.astype(np.float64)
        s_q = int(batch.new_tokens[batch.is_decode].max())
        sig = n_r.astype(np.int64) << 40
        sig += _buckets(np.bincount(rank, weights=k, minlength=ranks)) + 1024
        busy_ranks = np.flatnonzero(busy)
        uniq, first, inverse = np.unique(sig[busy_ranks], return_index=True, return_inverse=True)
        totals = np.empty(len(uniq))
        for i, key in enumerate(uniq.tolist()):
            hit = self._decode_memo.get((s_q, key))
            if hit is None:
                r = int(busy_ranks[first[i]])
                ops = self._rank_ops(self._segments(batch, rank == r))
                hit = (total_seconds(ops), ops)
                if len(self._decode_memo) > 100_000:
                    self._decode_memo.clear()
                self._decode_memo[(s_q, key)] = hit
            totals[i] = hit[0]
        rank_s[busy_ranks] = totals[inverse]
        crit = int(np.argmax(totals))
        rank_ops[int(busy_ranks[first[crit]])] = self._decode_memo[(s_q, int(uniq[crit]))][1]

    def _rank_ops(self, s: RankSegments) -> dict[str, OpTime]:
        """All of one rank's own work in a step (every layer), by op."""
        m, c, pr = self.model, self.ctx, self.pricer
        layer = mla_layer(pr, c, s) if m.attention == "mla" else gqa_layer(pr, c, s)
        ops = {name: scale(t, m.attention_layers) for name, t in layer.items()}
        if m.linear_attention:
            ops["kda"] = scale(linear_attention_layer(pr, c, s), m.linear_attention.num_layers)
        own_dense = self.deployment.dense_ffn != "unit"  # else unit-wide (`unit_dense_ops`)
        ffn = ffn_rank_ops(pr, c, s.tokens, dense=own_dense)
        ops["moe_gate"] = scale(ffn["moe_gate"], m.moe_layers)
        ops["moe_shared"] = scale(ffn["moe_shared"], m.moe_layers)
        if own_dense:
            ops["dense_mlp"] = scale(ffn["dense_mlp"], m.moe.first_dense_layers)
        own_head = self.deployment.lm_head == "rank"  # else unit-wide (`_unit_head`)
        if own_head:
            ops["lm_head"] = self._head(float(s.q[s.is_decode].sum() + s.sampling_prefills))
        ops["elementwise"] = rank_elementwise(pr, c, s)
        if c.tp > 1:
            allreduce = tp_allreduce(pr, m, self.deployment, self.gpu, s.tokens)
            ops["tp_allreduce"] = scale(allreduce, m.num_layers)
        drafts = self.deployment.mtp_draft_tokens
        dec = s.is_decode
        if drafts and dec.any():
            n = int(dec.sum())
            rows = float(n) if own_head else 0.0  # one logits row per request and pass
            ops["mtp_draft"] = combine(
                *(
                    scale(self._mtp_module(self._draft_segments(s, q), rows), times)
                    for q, times in draft_passes(drafts)
                )
            )
        if drafts and not dec.all():  # the module's extend over the prompt fills its own KV
            pre = ~dec
            chunks = RankSegments(q=s.q[pre], k=s.k[pre], is_decode=dec[pre], path=s.path[pre])
            rows = float(s.sampling_prefills) if own_head else 0.0
            ops["mtp_prefill"] = self._mtp_module(chunks, rows)
        return ops

    @staticmethod
    def _draft_segments(s: RankSegments, width: int) -> RankSegments:
        """A rank's decode requests as one MTP pass of `width` tokens each, over their caches."""
        dec = s.is_decode
        q = np.full(int(dec.sum()), float(width))
        return RankSegments(q=q, k=s.k[dec], is_decode=dec[dec], path=s.path[dec])

    def _head(self, tokens: float) -> OpTime:
        """Logits of `tokens` rows: lm_head is held and run in BF16 whatever the weights'
        dtype (vocab-parallel over attention TP)."""
        m, c = self.model, self.ctx
        return gemm(self.pricer, c, tokens, m.hidden_size, m.vocab_size // c.tp, "bf16")

    def _unit_head(self, batch: BatchShape) -> dict[str, OpTime]:
        """The head split over the unit (`sim.cost.head`): the step's logits rows in one pass,
        and, with MTP, each draft pass's (a row per decode request) and the MTP module's over
        completed prompts."""
        args = (self.pricer, self.ctx, self.deployment, self.gpu)
        rows = sampled_rows(batch)
        passes = [(rows, 1)]
        drafts = self.deployment.mtp_draft_tokens
        if drafts:
            dec = batch.is_decode
            passes.append((float(np.count_nonzero(dec)), drafts))
            passes.append((rows - float(batch.new_tokens[dec].sum()), 1))  # completed prompts
        out: dict[str, OpTime] = {}
        for rows, times in passes:
            for name, t in unit_head(*args, rows).items():
                out[name] = combine(out[name], scale(t, times)) if name in out else scale(t, times)
        return out

    def _mtp_module(self, s: RankSegments, logits: float) -> OpTime:
        """One forward of the MTP module over segments `s` on a rank: the BF16 eh_proj of the
        embedding and hidden state, one attention layer, the MoE layer's gate and shared
        experts (its routed experts are unit-wide), its kernels, and `logits` head rows."""
        m, c, pr = self.model, self.ctx, self.pricer
        layer = mla_layer(pr, c, s) if m.attention == "mla" else gqa_layer(pr, c, s)
        return combine(
            *layer.values(),
            *ffn_rank_ops(pr, c, s.tokens, dense=False).values(),
            draft_elementwise(pr, c, s),
            gemm(pr, c, s.tokens, 2 * m.hidden_size, m.hidden_size, "bf16"),
            self._head(logits),
        )

    def _routed_moe(self, unit_tokens: float, decode_only: bool) -> OpTime:
        """One MoE layer's routed-expert GEMMs on the busiest EP GPU."""
        return routed_gemms(self.pricer, self.model, self.deployment, unit_tokens, decode_only)

    def _unit_ops(
        self, load: CommLoad, draft: CommLoad | None, extend: CommLoad | None
    ) -> dict[str, OpTime]:
        """Unit-wide ops (routed experts, communication), memoised per 2^(1/16) token bucket.
        `draft`: the MTP draft passes' load; `extend`: the MTP module's over prompt chunks."""
        key: tuple[object, ...] = (load.decode_only, *load.key())
        for extra in (draft, extend):
            key += (extra.key(),) if extra else (None,)
        hit = self._unit_memo.get(key)
        if hit is None:
            hit = self._unit_ops_uncached(load, draft, extend)
            if len(self._unit_memo) > 100_000:
                self._unit_memo.clear()
            self._unit_memo[key] = hit
        return hit

    def _unit_ops_uncached(
        self, load: CommLoad, draft: CommLoad | None, extend: CommLoad | None
    ) -> dict[str, OpTime]:
        m, d, pr, n = self.model, self.deployment, self.pricer, load.unit_tokens
        ops = {"moe_routed": scale(self._routed_moe(n, load.decode_only), m.moe_layers)}
        act = routed_elementwise(pr, m, d, n, load.decode_only, load.sender_tokens)
        ops["moe_elementwise"] = scale(act, m.moe_layers)
        drafts = d.mtp_draft_tokens
        if draft is not None and draft.unit_tokens > 0:
            passes = draft_passes(drafts)
            moe = []
            for width, times in passes:
                n_dec = draft.unit_tokens * width
                act = routed_elementwise(pr, m, d, n_dec, True)
                moe.append(scale(combine(self._routed_moe(n_dec, True), act), times))
            ops["mtp_draft_moe"] = combine(*moe)
            comm = combine(
                *(draft_comm(pr, m, d, self.gpu, draft.scaled(w), times) for w, times in passes)
            )
            if comm.seconds > 0:
                ops["mtp_draft_comm"] = comm
        if extend is not None and extend.unit_tokens > 0:  # the MTP module over prompt chunks
            n_pre = extend.unit_tokens
            act = routed_elementwise(pr, m, d, n_pre, False, extend.sender_tokens)
            ops["mtp_prefill_moe"] = combine(self._routed_moe(n_pre, False), act)
            ops["mtp_prefill_comm"] = combine(*layer_comm_ops(pr, m, d, self.gpu, extend).values())
        ops.update(unit_comm_ops(pr, m, d, self.gpu, load))
        if d.dense_ffn == "unit":
            ops.update(unit_dense_ops(pr, self.ctx, d, self.gpu, load))
        return ops


def _indexer_times_topk(profile: Profile | None) -> bool:
    """Whether the profile's DSA indexer tables time the top-k selection with the logits
    (`kernels_calib`'s `torch_bmm_topk`), so that it is not priced again; the published
    `fp8_mqa_logits` tables time the logits kernel only."""
    tables = [] if profile is None else profile.tables
    return any(t.op.startswith("dsa_indexer") and "topk" in t.impl for t in tables)


def draft_passes(drafts: int) -> list[tuple[int, int]]:
    """The MTP module's passes per decode step, as (tokens per request, times): SGLang's draft
    extend after verify runs the module over each request's accepted tokens + 1, padded to
    drafts + 1 for its CUDA graph (`forward_draft_extend_after_decode`), and yields the first
    draft token; the other drafts - 1 tokens take one single-token pass each."""
    passes = [(drafts + 1, 1)]
    if drafts > 1:
        passes.append((1, drafts - 1))
    return passes


def _buckets(x: np.ndarray) -> np.ndarray:
    """Integer 2^(1/16) buckets of positive sums (0 stays its own bucket)."""
    out: np.ndarray = np.where(x > 0, np.round(np.log2(np.maximum(x, 1e-9)) * 16), -1)
    return out.astype(np.int64)
