"""A pool: the replicas of one deployment (or one side of a PD pair) behind one router.

The pool owns everything shared by its units: per-rank queues, KV pages and router load, the
feed its requests come from, its step log, and the named state changes that touch several of
those at once (route, admit, preempt, release, finish, hand off). Global rank index = unit *
ranks per unit + rank in the unit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from sim.cost.batch import ServingCost
from sim.engine.admission import NONE_ADMITTED, Admitted, RankBudget, fifo_admit
from sim.engine.arrivals import ClosedLoopFeed, ScheduledFeed, TransferFeed
from sim.engine.benchmark_feed import BenchmarkFeed
from sim.engine.kv import KvPages
from sim.engine.log import StepLog
from sim.engine.mtp import DraftSampler, DrawStream
from sim.engine.queues import RankQueues
from sim.engine.requests import FloatArray, IntArray, RequestTable
from sim.engine.router import RankLoad, make_router
from sim.engine.running import RunningSet
from sim.specs.deployment import Deployment

Feed = ScheduledFeed | ClosedLoopFeed | TransferFeed | BenchmarkFeed
AfterPrefill = Literal["decode", "transfer", "done"]


class UnitView(Protocol):
    """What the pool needs of its units: waking one, and its running requests."""

    index: int

    @property
    def rs(self) -> RunningSet: ...

    def wake(self) -> None: ...


Finished = Callable[[IntArray, float], None]
# refused requests (ids, the ranks they are pinned to or started on, or -1; time)
Refused = Callable[[IntArray, IntArray, float], None]


def ignore_finished(ids: IntArray, now: float) -> None:
    """Nobody waits for these requests (an open-loop or trace workload)."""


def ignore_refused(ids: IntArray, ranks: IntArray, now: float) -> None:
    """Nobody waits for these refusals (an open-loop or trace workload)."""


def fits_anywhere(ids: IntArray) -> np.ndarray:
    """No pool further on to fit: every request does."""
    return np.ones(ids.shape[0], dtype=bool)


@dataclass(frozen=True)
class PoolHooks:
    """Who hears of requests leaving a pool, and what else must hold them.

    `finished` and `refused` tell the workload's client (a closed loop's users, a benchmark's
    slots); `transfer` sends a PD prefill pool's finished prefills over the KV link;
    `downstream_fits` is the decode pool's `fits`, so a PD request that could never decode is
    refused on arrival.
    """

    finished: Finished = ignore_finished
    refused: Refused = ignore_refused
    transfer: Finished = ignore_finished
    downstream_fits: Callable[[IntArray], np.ndarray] = fits_anywhere


class Pool:
    """Shared state of the units of one pool. Units call `deliver` at each step boundary."""

    def __init__(
        self,
        *,
        name: str,
        deployment: Deployment,
        cost: ServingCost,
        table: RequestTable,
        feed: Feed,
        rng: np.random.Generator | DrawStream,
        after_prefill: AfterPrefill,
        make_unit: Callable[[Pool, int], UnitView],
        hooks: PoolHooks,
        first_token_in_decode: bool = False,
    ) -> None:
        """`make_unit(pool, index)` builds each of the pool's units, once the pool's own state
        is in place."""
        d = deployment
        self.name, self.deployment, self.cost, self.table, self.feed = name, d, cost, table, feed
        self.after_prefill = after_prefill
        self.first_token_in_decode = first_token_in_decode
        self.num_units, self.ranks_per_unit = d.replicas, d.attn_dp
        n = self.num_units * self.ranks_per_unit
        self.num_ranks = n
        self.kv = KvPages(
            n, cost.kv_capacity_tokens_per_rank, d.page_size_tokens, cost.state_tokens_per_request
        )
        self.queues = RankQueues(n)
        # work left (prefill + output tokens) per rank: queued requests' kept as they come and
        # go; running requests' summed from the units' running sets only when read (`work_left`)
        self.queued_work = np.zeros(n, dtype=np.int64)
        self.outstanding = np.zeros(n, dtype=np.int64)
        self.assigned = np.zeros(n, dtype=np.int64)  # requests on each rank, queued or running
        self.load = RankLoad(
            self.outstanding, self.kv.used, self.queues.queued_pages, self.assigned,
            self.queues.length,
        )  # fmt: skip
        self.router = make_router(d.router, n)
        self.sampler = DraftSampler(d.mtp_probs, rng)
        self.draft_tokens = d.mtp_draft_tokens
        self.max_running = d.max_running_requests
        self.prefill_budget = d.chunked_prefill_tokens
        self.prefill_budgets = np.full(self.ranks_per_unit, self.prefill_budget, dtype=np.int64)
        self.prefill_budgets.flags.writeable = False  # each plan spends a copy
        self.decode_reserve = d.decode_reserve_ratio
        self.mixed_chunk = d.mixed_chunk
        # TensorRT-LLM: one max_num_tokens budget holds a step's context and generation tokens
        # (nvidia.github.io/TensorRT-LLM, performance tuning guide: "Tuning Max Batch Size and
        # Max Num Tokens"; its scheduler fits generation requests first, then context chunks)
        self.shared_token_budget = d.engine == "trtllm"
        # no context chunking (TensorRT-LLM's enable_chunked_prefill off): a prompt runs whole
        # in one step (a decode pool's requests arrive prefilled: no prompt meets its budget)
        self.whole_prompts = not d.chunked_prefill and d.role != "decode"
        # (log index of the step, gaps) of tokens that came after sitting steps out: ITL
        self.late_gaps: list[tuple[int, FloatArray]] = []
        self.log = StepLog(self.ranks_per_unit)
        self.hooks = hooks
        self.routed = self.rejected = self.completed = self.transferred = self.preempted = 0
        self.units = [make_unit(self, u) for u in range(self.num_units)]
        feed.on_push = self.wake_all

    def work_left(self) -> IntArray:
        """Prefill + output tokens still to compute on each rank, queued and running (what
        `least_tokens` balances), refreshed into `outstanding` (the routers' live view)."""
        out = self.queued_work.copy()
        R = self.ranks_per_unit
        for u in self.units:
            out[u.index * R : (u.index + 1) * R] += u.rs.work_per_rank(self.table)
        self.outstanding[:] = out
        return self.outstanding

    def wake_all(self) -> None:
        for u in self.units:
            u.wake()

    # -- admission needs -----------------------------------------------------------------------
    def fits(self, ids: IntArray) -> np.ndarray:
        """Whether each request could ever run here (its largest KV fits one rank)."""
        t = self.table
        return self._fits(t.input_tokens[ids], t.output_tokens[ids], t.prefill_target[ids], ids)

    def _most(self, inp: IntArray, out: IntArray, target: IntArray) -> IntArray:
        """The most tokens each request will hold here: prompt and output (and draft slots) where
        it decodes, its prefill target where it only prefills."""
        return inp + out + self.draft_tokens if self.after_prefill == "decode" else target

    def reserved_pages(self, ids: IntArray, covered: IntArray, held: IntArray) -> IntArray:
        """Pages beyond `held` that `decode_reserve` keeps for requests `ids`, whose pages now
        cover `covered` tokens: that share of the tokens still to come, rounded up to pages."""
        t = self.table
        most = self._most(t.input_tokens[ids], t.output_tokens[ids], t.prefill_target[ids])
        to_come = np.maximum(most - covered, 0)
        extra = np.ceil(self.decode_reserve * to_come).astype(np.int64)
        return np.maximum(self.kv.pages_for(covered + extra) - held, 0)  # type: ignore[no-any-return]

    def _fits(self, inp: IntArray, out: IntArray, target: IntArray, ids: IntArray) -> np.ndarray:
        most = self._most(inp, out, target)
        ok = most <= self.kv.max_tokens  # same as pages_for(most) <= capacity_pages
        if self.whole_prompts:  # a prompt longer than one step's budget never runs
            ok &= (target <= self.prefill_budget) | (self.table.prefilled[ids] >= target)
        if self.hooks.downstream_fits is fits_anywhere:
            return ok  # type: ignore[no-any-return]
        return ok & self.hooks.downstream_fits(ids)  # type: ignore[no-any-return]

    def _needs(self, ids: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        """(KV pages on admission, prefill tokens to compute, work left) of queued requests.

        A request with prefill left reserves its prompt's pages; a prefilled one (PD arrival)
        the pages of its next decode step.
        """
        t = self.table
        gen, target = t.generated[ids], t.prefill_target[ids]
        todo = target - t.prefilled[ids]
        decode_ctx = t.input_tokens[ids] + gen + self.draft_tokens
        pages = self.kv.pages_for(np.where(todo > 0, target, decode_ctx))
        return pages, todo, todo + t.output_tokens[ids] - gen

    # -- named state changes -------------------------------------------------------------------
    def deliver(self, now: float) -> None:
        """Route every request the feed has released by `now`, or reject it if it never fits (a
        closed loop's refused users send their next requests at once: those are routed too)."""
        while self.feed.next_time() <= now:
            ids, pins = self.feed.pop_until(now, self.table)
            if ids.shape[0] == 0:
                return
            self._route_new(ids, pins, now)

    def _route_new(self, ids: IntArray, pins: IntArray, now: float) -> None:
        t = self.table
        # new table rows come in order: slices read and write them without gathering
        rows: IntArray | slice = slice(int(ids[0]), int(ids[-1]) + 1) if self.feed.fresh else ids
        inp, out, target = t.input_tokens[rows], t.output_tokens[rows], t.prefill_target[rows]
        ok = self._fits(inp, out, target, ids)
        if np.count_nonzero(ok) != ok.shape[0]:  # cheaper than all() on small arrays
            refused = ids[~ok]
            t.reject(refused)
            self.rejected += refused.shape[0]
            refused_pins = pins[~ok] if pins.shape[0] else t.home_rank[refused]
            self.hooks.refused(refused, refused_pins, now)
            ids, inp, out, target = ids[ok], inp[ok], out[ok], target[ok]
            pins = pins[ok] if pins.shape[0] else pins
            rows = ids
        gen = t.generated[rows]
        todo = target - t.prefilled[rows]
        pages = self.kv.pages_for(np.where(todo > 0, target, inp + gen + self.draft_tokens))
        remaining = todo + out - gen
        if pins.shape[0]:
            r_arr = pins % self.num_ranks
        else:
            if self.router.reads_work:
                self.work_left()
            r_arr = self.router.choose_many(self.load, pages, remaining)
        self.queues.push_many(r_arr, ids, pages, todo)
        np.add.at(self.queued_work, r_arr, remaining)
        np.add.at(self.assigned, r_arr, 1)
        t.route(rows, r_arr)
        if self.feed.fresh:  # new requests have no home rank yet
            t.home_rank[rows] = r_arr
        else:
            home = t.home_rank[rows]
            t.home_rank[rows] = np.where(home < 0, r_arr, home)
        self.routed += int(ids.shape[0])
        if self.num_units == 1:
            self.units[0].wake()
        else:
            for u in np.unique(r_arr // self.ranks_per_unit).tolist():
                self.units[u].wake()

    def has_queued(self, lo: int) -> bool:
        """Whether any rank of the unit whose first rank is `lo` has requests queued."""
        return bool(np.count_nonzero(self.queues.length[lo : lo + self.ranks_per_unit]))

    def admissible(self, lo: int, free_pages: IntArray, free_slots: IntArray) -> IntArray:
        """Ranks (in the unit at `lo`) whose first queued request might be admitted now."""
        return self.queues.admissible(lo, lo + self.ranks_per_unit, free_pages, free_slots)

    def admit(self, lo: int, ranks: IntArray, budget: RankBudget) -> Admitted:
        """Admit queued requests FIFO on `ranks` of the unit at `lo` within `budget` (spent):
        queued -> running, their KV pages taken (`sim.engine.admission.fifo_admit`)."""
        reserve = self.reserved_pages if self.decode_reserve else None
        ids, on, pages, chunks = fifo_admit(self.queues, self.table, lo, ranks, budget, reserve)
        if ids.shape[0] == 0:
            return NONE_ADMITTED
        g = on + lo
        np.subtract.at(self.queued_work, g, self.table.remaining_tokens(ids))
        dec = self.table.admit(ids, pages)
        self.kv.take(g, pages)
        return Admitted(ids, on, pages, chunks, dec)

    def preempt(self, ids: IntArray) -> None:
        """Recompute preemption: free KV, re-queue at the front of the same rank (oldest first)."""
        if ids.shape[0] == 0:
            return
        t = self.table
        ranks = t.rank[ids]
        self.preempted += int(ids.shape[0])
        self.kv.give(ranks, t.kv_pages[ids])
        t.preempt(ids)
        np.add.at(self.queued_work, ranks, t.remaining_tokens(ids))
        pages, tokens, _ = (a.tolist() for a in self._needs(ids))
        by_rank: dict[int, list[tuple[int, int, int]]] = {}
        for k, (i, r) in enumerate(zip(ids.tolist(), ranks.tolist(), strict=True)):
            by_rank.setdefault(r, []).append((i, pages[k], tokens[k]))
        for r, entries in by_rank.items():
            self.queues.push_front(r, entries)

    def release(self, ranks: IntArray, pages: IntArray) -> None:
        """Requests leave their ranks (and their running set): their KV pages free up and they
        no longer count on the ranks. Then `finish` or `hand_off`."""
        np.subtract.at(self.assigned, ranks, 1)
        self.kv.give(ranks, pages)

    def finish(self, ids: IntArray, now: float) -> None:
        """Released requests are done (ids ascending)."""
        self.table.complete(ids, now)
        self.completed += int(ids.shape[0])
        self.hooks.finished(ids, now)

    def hand_off(self, ids: IntArray, now: float) -> None:
        """PD: released requests finished their prefill; the KV leaves for the decode pool."""
        self.table.start_transfer(ids)
        self.transferred += int(ids.shape[0])
        self.hooks.transfer(ids, now)
