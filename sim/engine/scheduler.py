"""Per-rank continuous batching for one lock-step unit: decide what the next step computes.

`plan()` reads as three phases, each rank on its own, all ranks at once:
1. decode: every running decode request verifies 1 + d tokens; its KV grows first, and when a
   rank's KV would overflow, the newest requests on it are preempted (recompute: their KV is
   dropped and they re-queue at the front);
2. prefill: requests mid-prefill continue, then queued requests are admitted (FIFO) while the
   rank has a free slot (max running requests), the request's KV fits in free pages, and prefill
   tokens remain in the step's chunked-prefill budget (the last one admitted may get a partial
   chunk);
3. the unit's batch: one `BatchShape` over all its ranks (idle ranks have no segments).

`apply_step` (in `sim.engine.step`) changes state after the step's time has passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sim.cost.batch import BatchShape
from sim.engine.requests import IntArray
from sim.engine.running import RunningSet

if TYPE_CHECKING:
    from sim.engine.pool import Pool


@dataclass(frozen=True)
class StepPlan:
    """One step of one unit, as positions in its `RunningSet` (`n` requests at plan time)."""

    n: int
    decode_pos: IntArray | None  # None: every running request decodes
    prefill_pos: IntArray  # requests mid-prefill (chunk 0 = waits this step)
    chunks: IntArray
    batch: BatchShape
    batch_per_rank: IntArray  # request segments per rank in `batch`

    @property
    def n_decode(self) -> int:
        return self.n if self.decode_pos is None else int(self.decode_pos.shape[0])


@dataclass
class RankBudget:
    """What one step may still add on each rank of a unit (plain Python ints for the loop)."""

    free_pages: list[int]
    free_slots: list[int]
    prefill_tokens: list[int]


def _preempt(pool: Pool, rs: RunningSet, need: IntArray, over: IntArray) -> None:
    """Preempt the newest requests on overflowing ranks until their KV need fits."""
    victims: list[int] = []
    for r in over.tolist():
        pos = (rs.rank == r).nonzero()[0]
        pos = pos[np.argsort(rs.ids[pos])[::-1]]  # newest (highest id) first
        total = int(need[pos].sum())
        for p, h in zip(pos.tolist(), need[pos].tolist(), strict=True):
            if total <= pool.kv.capacity_pages:
                break
            victims.append(p)
            total -= h
    mask = np.zeros(rs.n, dtype=bool)
    mask[victims] = True
    rs.sync(pool.table, mask)
    pool.preempt(np.sort(rs.ids[mask]))
    rs.remove(mask)


def _continue_prefill(pool: Pool, rs: RunningSet, budget: RankBudget) -> tuple[IntArray, IntArray]:
    """(positions, chunks) of requests already mid-prefill, oldest first on each rank."""
    pos = (~rs.is_decode).nonzero()[0]
    if pos.size == 0:
        return pos, pos
    pos = pos[np.argsort(rs.ids[pos])]
    t, ids = pool.table, rs.ids[pos]
    chunks = np.zeros(pos.shape[0], dtype=np.int64)
    rem = (t.prefill_target[ids] - t.prefilled[ids]).tolist()
    for k, (r, left) in enumerate(zip(rs.rank[pos].tolist(), rem, strict=True)):
        c = min(left, budget.prefill_tokens[r])
        budget.prefill_tokens[r] -= c
        chunks[k] = c
    return pos, chunks


def _admit(pool: Pool, lo: int, budget: RankBudget) -> tuple[list[int], list[int], list[int]]:
    """FIFO admission on every rank that can take its first queued request.

    Returns (ids, pages, chunk) of admitted requests; chunk 0 means already prefilled (PD decode
    arrivals), which go straight to decode.
    """
    q = pool.queues
    hi = lo + pool.ranks_per_unit
    free_pages = np.asarray(budget.free_pages, dtype=np.int64)
    free_slots = np.asarray(budget.free_slots, dtype=np.int64)
    ids: list[int] = []
    pages: list[int] = []
    chunks: list[int] = []
    for r_loc in q.admissible(lo, hi, free_pages, free_slots).tolist():
        r = lo + r_loc
        while q.length[r]:
            i, p, tokens = q.peek(r)
            if p > budget.free_pages[r_loc] or budget.free_slots[r_loc] == 0:
                break
            if tokens > 0 and budget.prefill_tokens[r_loc] == 0:
                break
            q.pop(r)
            c = min(tokens, budget.prefill_tokens[r_loc])
            budget.prefill_tokens[r_loc] -= c
            budget.free_pages[r_loc] -= p
            budget.free_slots[r_loc] -= 1
            ids.append(i)
            pages.append(p)
            chunks.append(c)
    return ids, pages, chunks


def _grow(pool: Pool, rs: RunningSet) -> tuple[IntArray, IntArray]:
    """(positions, new page counts) of decode requests whose KV crosses a page this step.

    A decode step writes 1 + d tokens, so a request needs ceil((ctx + d + state) / page) pages;
    comparing against the pages it holds avoids dividing for every request every step.
    """
    kv = pool.kv
    over = rs.ctx + (pool.draft_tokens + kv.state_tokens) > rs.pages * kv.page_tokens
    dec = rs.is_decode
    changed = (over if dec.all() else over & dec).nonzero()[0]
    return changed, kv.pages_for(rs.ctx[changed] + pool.draft_tokens)


def plan(pool: Pool, unit: int, rs: RunningSet) -> StepPlan | None:
    """What the unit computes next, or None when it holds and can admit nothing."""
    kv, R = pool.kv, pool.ranks_per_unit
    lo = unit * R
    if rs.n == 0 and not pool.queues.length[lo : lo + R].any():
        return None
    if rs.n:
        changed, need = _grow(pool, rs)
        if changed.size:
            delta = need - rs.pages[changed]
            grow = np.bincount(rs.rank[changed], weights=delta, minlength=R).astype(np.int64)
            over = (kv.used[lo : lo + R] + grow > kv.capacity_pages).nonzero()[0]
            if over.size:  # rare: preempt, then plan again without the victims
                full_need = rs.pages.copy()
                full_need[changed] = need
                _preempt(pool, rs, full_need, over)
                return plan(pool, unit, rs)
            kv.take_dense(lo, grow)
            rs.pages[changed] = need
    counts = np.bincount(rs.rank, minlength=R)
    budget = RankBudget(
        free_pages=kv.free(slice(lo, lo + R)).tolist(),
        free_slots=(pool.max_running - counts).tolist(),
        prefill_tokens=[pool.prefill_budget] * R,
    )
    pre_pos, chunks = _continue_prefill(pool, rs, budget)
    new_ids, new_pages, new_chunks = _admit(pool, lo, budget)
    if new_ids:
        a = np.asarray(new_ids, dtype=np.int64)
        pool.admit(a, np.asarray(new_pages, dtype=np.int64))
        first = rs.n
        rs.append(pool.table, a, lo)
        counts += np.bincount(rs.rank[first:], minlength=R)
        c = np.asarray(new_chunks, dtype=np.int64)
        pre_pos = np.concatenate([pre_pos, first + (c > 0).nonzero()[0]])
        chunks = np.concatenate([chunks, c[c > 0]])
    dec = rs.is_decode
    decode_pos = None if dec.all() else dec.nonzero()[0]
    n_dec = rs.n if decode_pos is None else decode_pos.shape[0]
    if n_dec == 0 and not (chunks > 0).any():
        return None
    batch = _batch(pool, rs, decode_pos, pre_pos, chunks)
    if batch.size != rs.n:  # some mid-prefill request waits this step
        counts = np.bincount(batch.rank, minlength=R)
    return StepPlan(
        n=rs.n,
        decode_pos=decode_pos,
        prefill_pos=pre_pos,
        chunks=chunks,
        batch=batch,
        batch_per_rank=counts,
    )


def _batch(
    pool: Pool, rs: RunningSet, dec: IntArray | None, pre: IntArray, chunks: IntArray
) -> BatchShape:
    d = pool.draft_tokens
    sel = slice(None) if dec is None else dec
    rank, kv = rs.rank[sel], rs.ctx[sel] + d
    n_dec = int(rank.shape[0])
    new_dec = np.full(n_dec, 1 + d, dtype=np.int64)
    go = chunks > 0
    if not go.any():
        return BatchShape(
            num_ranks=pool.ranks_per_unit, rank=rank.copy(), new_tokens=new_dec, kv_tokens=kv,
            is_decode=np.ones(n_dec, dtype=bool),
        )  # fmt: skip
    pre, chunks = pre[go], chunks[go]
    is_decode = np.zeros(n_dec + pre.shape[0], dtype=bool)
    is_decode[:n_dec] = True
    return BatchShape(
        num_ranks=pool.ranks_per_unit,
        rank=np.concatenate([rank, rs.rank[pre]]),
        new_tokens=np.concatenate([new_dec, chunks]),
        kv_tokens=np.concatenate([kv, pool.table.prefilled[rs.ids[pre]] + chunks]),
        is_decode=is_decode,
    )
