"""Step cost of one deployment: the lock-step unit's forward time for an actual batch.

A step lasts as long as the slowest attention rank's attention + dense work, plus the unit-wide
routed-expert time on the busiest EP GPU, plus communication (TP all-reduce, EP dispatch and
combine). Two-batch overlap splits the step into two micro-batches so one's EP communication hides
behind the other's compute. Every op carries the source of its time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import cast

import numpy as np
from numpy.typing import NDArray

from sim.cost.batch import BatchShape, StepCost, all_equal
from sim.cost.calibrated import CalibratedCost, check_model
from sim.cost.comm_load import CommLoad, comm_loads
from sim.cost.decode_sums import decode_sums
from sim.cost.dispatch import MlaPaths
from sim.cost.layer_ops import RankContext, RankSegments, indexer_times_topk
from sim.cost.memo import BoundedCache
from sim.cost.memory import dsa_active, kv_bytes_per_token, kv_bytes_per_token_layer, plan_memory
from sim.cost.mixed_rank import MixedRanks
from sim.cost.mixed_shape import MixedShape, Shape
from sim.cost.mixed_work import MixedWork
from sim.cost.one_rank import OneRankSteps
from sim.cost.overheads import Figure, engine_overheads, shared_expert_tp, stream_overlap_s
from sim.cost.overlap import comm_time, moe_layers_s
from sim.cost.pricing import Pricer
from sim.cost.rank_shape import (
    DecodeTable,
    RankShape,
    shape_segments,
)
from sim.cost.rank_work import rank_ops, separable
from sim.cost.rate import OpTime, total_seconds
from sim.cost.roofline import OpEstimator, RooflineCost
from sim.cost.step_ranks import StepCounts, StepRanks
from sim.cost.tbo_saving import SplitStep, TboSaving
from sim.cost.unit_work import micro_batch_ops, unit_head_ops, unit_ops
from sim.specs.deployment import Deployment
from sim.specs.gpu import GpuSpec
from sim.specs.model import ModelSpec
from sim.specs.profile import Profile

# memo sizes: a long run meets a few thousand rank shapes; the bound keeps a sweep's worker
# from growing without end
RANK_MEMO_ENTRIES = 50_000
UNIT_MEMO_ENTRIES = 50_000
Ops = dict[str, OpTime]
_Merged = tuple[Ops, Ops, Ops, float]  # a rank's ops, the unit's, the two merged, their total


@dataclass(frozen=True)
class RankWork:
    """All of one rank's own work in a step: its total, its ops and its time in the MoE layers
    (`moe_layers_s`)."""

    seconds: float
    ops: dict[str, OpTime]
    moe_s: float


class ServingCostModel:
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
        # what each roofline-priced kernel pays beyond its work, and its breakdown label: the
        # step log shows those launches in a row of their own (`sim.engine.log`, LAUNCH_ROW)
        self.launch: Figure | None = None
        self._launch_label = "published"
        if estimator is None and profile is not None:
            if model.attention == "mla":
                check_model(profile, model)
            r = profile.roofline
            # an engine replays its decode steps from CUDA graphs: kernels priced by the
            # roofline (the profile's ops without a table among them) pay the measured replay
            # gap, not the profile's residual (`sim.cost.overheads`)
            self.launch = Figure(
                value=r.launch_overhead_us.value, source=r.launch_overhead_us.source
            )
            self._launch_label = "measured" if profile.kind == "measured" else "published"
            if self.overheads is not None:
                self.launch, self._launch_label = self.overheads.graph_launch_us, "published"
            launch_s = self.launch_s
            estimator = CalibratedCost(profile, gpu, profile_gpu, launch_s=launch_s)
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
            fallback=fallback,
            attention_fallback=attention_fallback,
            mla=model.mla_spec if model.attention == "mla" else None,
        )
        self.ctx = RankContext(
            model=model,
            heads=model.num_heads // d.attn_tp,
            tp=d.attn_tp,
            shared_tp=shared_expert_tp(model, d),
            # `unit`: the dense MLP is unit-wide work (`sim.cost.dense`); its SiLU, over the
            # gathered rows at 1/GPUs of the width, is a rank's rows at 1/attn_tp
            dense_split=1 if d.dense_ffn == "dp" else d.attn_tp,
            weight_dtype=d.weight_dtype,
            kv_dtype=d.kv_dtype,
            kv_bytes_layer=kv_bytes_per_token_layer(model, d.kv_dtype, sparse=self.sparse),
            topk=model.dsa.index_topk if (self.sparse and model.dsa) else 0,
            chunk_tokens=d.chunked_prefill_tokens,
            topk_in_indexer=indexer_times_topk(profile),
            engine=d.engine,
        )
        # each segment's MLA path, and a decode side's one path (`sim.cost.dispatch`)
        chooser = MlaPaths(d.mla_policy, model, self.ctx.heads, sparse=self.sparse)
        self._paths, self._decode_path = chooser.paths, chooser.decode_path
        self._rank_memo: BoundedCache[RankShape, RankWork] = BoundedCache(RANK_MEMO_ENTRIES)
        # pieces of a rank's ops kept by what sets them (`layer_ops.Memo`): its kernels' time
        self._pieces: BoundedCache[tuple[object, ...], OpTime] = BoundedCache(RANK_MEMO_ENTRIES)
        # a decode-only step's uniform ranks, found by signature (priced through `_rank_memo`)
        self._decode_table: DecodeTable[RankWork] = DecodeTable(
            lambda shape: self._rank_memo.get(shape, partial(self._price_rank, shape)),
            RANK_MEMO_ENTRIES,
        )
        self._unit_memo: BoundedCache[tuple[object, ...], dict[str, OpTime]]
        self._unit_memo = BoundedCache(UNIT_MEMO_ENTRIES)
        # a step's ops (its critical rank's, then the unit-wide ones) and their total, by the
        # two memoised dicts they merge (`_merged`)
        self._merges: BoundedCache[tuple[int, int], _Merged] = BoundedCache(RANK_MEMO_ENTRIES)
        # ranks with prompt chunks: priced from memoised parts where the work splits into them
        self._mixed = MixedRanks(self.pricer, self.ctx, d, gpu) if separable(self.ctx) else None
        # the step's ranks shaped, or for a step run whole priced (`sim.cost.step_ranks`)
        self._ranks = StepRanks(self._decode_table, self._mixed, self._paths)
        self._tbo = TboSaving(
            model, d, self._mixed, self._rank_ops, self._micro_ops, RANK_MEMO_ENTRIES
        )
        # a one-rank unit's steps, whole, by their rank's shape (`sim.cost.one_rank`)
        self._one_rank: OneRankSteps | None = None
        if not d.two_batch_overlap and d.lm_head != "unit":
            self._one_rank = OneRankSteps(
                self._paths, self._decode_path, self._mixed is not None, RANK_MEMO_ENTRIES
            )

    # -- memory facts the engine and results need ---------------------------------------------
    @property
    def launch_s(self) -> float:
        """Seconds each roofline-priced kernel pays for its launch (`launch`; 0 without one)."""
        return 0.0 if self.launch is None else self.launch.value * 1e-6

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
        """The step's duration and breakdown: a pure function of `batch` (ranks are priced at
        their `RankShape`, unit-wide work at its rounded `CommLoad`)."""
        if batch.num_ranks == 1 and self._one_rank is not None:
            return self._one_rank.price(batch, self._step_cost)
        return self._step_cost(batch)

    def _step_cost(self, batch: BatchShape) -> StepCost:
        ranks = batch.num_ranks
        if batch.size == 0:
            return StepCost(duration_s=0.0, rank_own_s=np.zeros(ranks))
        rank, dec = batch.rank, batch.is_decode
        n_r = batch.segments_per_rank
        if n_r is None:
            n_r = np.bincount(rank, minlength=ranks)
        new = batch.new_tokens
        tokens_r: np.ndarray
        # (count_nonzero: far cheaper than any() or all() on a step's small arrays)
        decode_only = np.count_nonzero(dec) == dec.shape[0]
        # a step with chunks: its decode side counted once, where it is one width and path
        # (one rank's arrays are short: selecting from them costs less than counting)
        sums = None if decode_only or ranks == 1 else decode_sums(batch, n_r, self._decode_path)
        one_width = sums is None and all_equal(new)
        if sums is not None:  # the decode tokens per rank, and the few chunks' added
            chunk_tokens = new[sums.n :].astype(np.float64)
            tokens_r = sums.tokens + np.bincount(rank[sums.n :], chunk_tokens, minlength=ranks)
        elif one_width:  # uniform verify width: no weighted count needed
            tokens_r = n_r * float(new[0])  # float array
        else:
            tokens_r = np.bincount(rank, weights=new.astype(np.float64), minlength=ranks)
        mixed = np.zeros(ranks, dtype=bool)
        if not decode_only:
            mixed[rank[sums.n :] if sums is not None else rank[~dec]] = True
        busy_decode = ~mixed & (n_r > 0)
        # SGLang splits a step into two micro-batches only when every busy DP rank runs the same
        # forward mode: all extend (a prefill chunk, decode requests alongside or not) or all
        # decode; a step where some ranks prefill while others decode runs whole
        modes_agree = decode_only or not np.count_nonzero(busy_decode)
        splits = self.deployment.two_batch_overlap and modes_agree
        uniform = self._uniform_decode(batch, n_r) if decode_only and one_width else None
        counts = StepCounts(batch, n_r, mixed, busy_decode, tokens_r, sums)
        # a step of several chunk ranks that runs whole needs their seconds and its slowest
        # rank's ops alone: the work of one rank, not of each (`StepRanks.whole_with_chunks`)
        whole_step = not splits and int(np.count_nonzero(mixed)) > 1
        shapes: Sequence[Shape] = ()
        works: Sequence[RankWork | MixedWork] = ()
        index: NDArray[np.intp]
        crit_work: RankWork | MixedWork | None = None
        if uniform is not None:
            shapes, works, index, rank_s = uniform
        elif whole_step and sums is not None and self._mixed is not None:
            rank_s, crit_work = self._ranks.whole_with_chunks(counts)
            index = np.zeros(0, dtype=np.intp)
        else:
            shapes, index = self._ranks.shapes(counts)
            # ranks with chunks come first, priced by parts; decode ranks' shapes whole
            n_mixed = int(np.count_nonzero(mixed)) if self._mixed is not None else 0
            priced: list[RankWork | MixedWork] = []
            if n_mixed and self._mixed is not None:
                priced += self._mixed.works(cast(list[MixedShape], shapes[:n_mixed]))
            whole = cast(list[RankShape], shapes[n_mixed:])
            priced += self._rank_memo.get_many(whole, self._price_rank)
            works = priced
            totals = np.asarray([w.seconds for w in works] + [0.0])
            rank_s = totals[index]  # idle ranks index the trailing 0
        crit = int(rank_s.argmax())
        if crit_work is None:
            crit_work = works[int(index[crit])]
        mtp = self.deployment.mtp_draft_tokens > 0
        # a decode-only step's requests per rank are its decode requests: counted once
        counted = n_r if decode_only else None
        load, draft, extend = (
            None if x is None else x.rounded()
            for x in comm_loads(batch, tokens_r, crit, mtp=mtp, requests_r=counted, sums=sums)
        )
        assert load is not None
        unit_ops = self._unit_ops(load, draft, extend)
        if self.deployment.lm_head == "unit":
            ops = {**crit_work.ops, **unit_ops}
            ops.update(unit_head_ops(self.pricer, self.ctx, self.deployment, self.gpu, batch))
            duration = total_seconds(ops)
        else:
            ops, duration = self._merged(crit_work.ops, unit_ops)
        saved = 0.0
        if splits and comm_time(unit_ops) > 0:
            step = SplitStep(
                batch, n_r, load, rank_s, tokens_r, crit, shapes, works, index, unit_ops
            )
            saved = self._tbo.saved_s(step)
            duration -= saved
        elif not self.deployment.two_batch_overlap and self.overheads is not None:
            # a graph-replayed decode runs the shared experts on a second stream
            graph = decode_only and int(n_r.max()) <= self.overheads.graph_max_batch.value
            hidden = stream_overlap_s(self.overheads, ops, graph)
            saved, duration = saved + hidden, duration - hidden
        rank_s.flags.writeable = False  # a step's price may be shared (`sim.cost.one_rank`)
        return StepCost(
            duration_s=duration,
            rank_own_s=rank_s,
            ops=ops,
            overlap_saved_s=saved,
            launch_s=self.launch_s,
            launch_label=self._launch_label,
        )

    def _uniform_decode(
        self, batch: BatchShape, n_r: np.ndarray
    ) -> tuple[list[RankShape], list[RankWork], NDArray[np.intp], np.ndarray] | None:
        """A decode-only step of one width (the caller has checked both) and one MLA path
        (nearly every decode step): (shapes, works, each rank's index into them, each rank's
        own seconds) from the decode table, as `StepRanks.shapes` and the memo would give them.
        None where the paths differ."""
        path = self._decode_path(batch.new_tokens, batch.kv_tokens, batch.is_decode)
        if path is None:
            return None
        t = self._decode_table
        return (t.shapes, t.works, *t.ranks(batch, n_r, int(batch.new_tokens[0]), path))

    def _rank_work(self, shape: Shape) -> RankWork | MixedWork:
        """All of one rank's own work at `shape`, memoised (whole, or by parts)."""
        if isinstance(shape, MixedShape):
            assert self._mixed is not None
            return self._mixed.work(shape)

        return self._rank_memo.get(shape, partial(self._price_rank, shape))

    def _price_rank(self, shape: RankShape) -> RankWork:
        ops = self._rank_ops(shape_segments(shape))
        return RankWork(seconds=total_seconds(ops), ops=ops, moe_s=moe_layers_s(self.model, ops))

    def _rank_ops(self, s: RankSegments) -> dict[str, OpTime]:
        return rank_ops(self.pricer, self.ctx, self.deployment, self.gpu, s, self._pieces.get)

    def _merged(self, rank_ops: Ops, unit_ops: Ops) -> tuple[Ops, float]:
        """`rank_ops` then `unit_ops` in one dict, with its seconds summed: kept by the two
        dicts' identities (both memoised, so steps repeat them: a rank's work and a rounded
        load recur), each entry holding both so that no other dict can take their ids. The
        same dict each time also lets the step log reuse its row. Callers must not change it."""
        key = (id(rank_ops), id(unit_ops))
        found = self._merges.find(key)
        if found is not None and found[0] is rank_ops and found[1] is unit_ops:
            return found[2], found[3]
        ops = {**rank_ops, **unit_ops}
        duration = total_seconds(ops)
        self._merges.put(key, (rank_ops, unit_ops, ops, duration))
        return ops, duration

    def _unit_ops(
        self, load: CommLoad, draft: CommLoad | None, extend: CommLoad | None
    ) -> dict[str, OpTime]:
        """Unit-wide ops (`sim.cost.unit_work`) of rounded loads, memoised by them."""
        args = (self.pricer, self.ctx, self.deployment, self.gpu)
        return self._unit_memo.get(
            ("step", load, draft, extend),
            lambda: unit_ops(*args, load, draft, extend, self._pieces.get, self._unit_memo.get),
        )

    def _micro_ops(self, load: CommLoad) -> dict[str, OpTime]:
        """One micro-batch's routed experts and EP exchange at a rounded load, memoised."""
        args = (self.pricer, self.model, self.deployment, self.gpu)
        key = ("micro", load, None, None)
        return self._unit_memo.get(key, lambda: micro_batch_ops(*args, load, self._pieces.get))
