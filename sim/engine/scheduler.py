"""Per-rank continuous batching for one lock-step unit: decide what the next step computes.

`plan()` reads as three phases, each rank on its own, all ranks at once:
1. decode: every running decode request verifies 1 + d tokens; its KV grows first, and when a
   rank's KV would overflow, the newest requests on it are preempted (recompute: their KV is
   dropped and they re-queue at the front);
2. prefill: requests mid-prefill continue, then queued requests are admitted (FIFO, by
   `Pool.admit`) while the rank has a free slot (max running requests), the request's KV fits
   in free pages, and prefill tokens remain in the step's chunked-prefill budget (the last one
   admitted may get a partial chunk); under TensorRT-LLM the budget is max_num_tokens less the
   rank's decode tokens (its scheduler fits generation first, then context chunks, in one token
   budget);
3. the unit's batch: one `BatchShape` over all its ranks (idle ranks have no segments).

`apply_step` (in `sim.engine.step`) changes state after the step's time has passed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, TypeVar

import numpy as np
from numpy.typing import NDArray

from sim.cost.batch import BatchShape
from sim.engine.admission import NONE_ADMITTED, RankBudget
from sim.engine.requests import IntArray
from sim.engine.running import RunningSet, leading

if TYPE_CHECKING:
    from sim.engine.pool import Pool

G = TypeVar("G", bound=np.generic)

_NONE = np.zeros(0, dtype=np.int64)
_NONE.flags.writeable = False


class StepPlan(NamedTuple):
    """One step of one unit, as positions in its `RunningSet` (`n` requests at plan time).

    Rows `admitted_from`..n-1 joined the running set in this plan.
    """

    n: int
    decode_pos: IntArray | slice | None  # None: every running request decodes; a slice: the
    # decode rows lead the running set (`RunningSet.decode_rows`)
    prefill_pos: IntArray  # requests mid-prefill (chunk 0 = waits this step)
    chunks: IntArray
    batch: BatchShape
    batch_per_rank: IntArray  # request segments per rank in `batch`
    admitted_from: int
    waiting_pos: IntArray | None = None  # decode rows that sit this step out (unmixed chunks)

    @property
    def n_decode(self) -> int:
        return _rows(self.decode_pos, self.n)


def _rows(pos: IntArray | slice | None, n: int) -> int:
    """How many rows `pos` names in a running set of `n` rows (None: all of them)."""
    if pos is None:
        return n
    return int(pos.stop) if isinstance(pos, slice) else int(pos.shape[0])


def _preempt(pool: Pool, rs: RunningSet, over: IntArray) -> None:
    """Preempt the newest requests on overflowing ranks until their KV need fits."""
    need = rs.pages.copy()  # what every request holds after this step's growth
    grows = rs.kv > rs.room
    if rs.n_prefill:
        grows &= rs.is_decode
    need[grows] = pool.kv.pages_for(rs.kv[grows])
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
    pos = np.unique(np.asarray(victims, dtype=np.int64))
    rs.sync(pool.table, pos)
    pool.preempt(np.sort(rs.ids[pos]))
    rs.remove(pos)


def _continue_prefill(pool: Pool, rs: RunningSet, budget: RankBudget) -> tuple[IntArray, IntArray]:
    """(positions, chunks) of requests already mid-prefill, oldest first on each rank: each gets
    what its rank's prefill budget has left after the older ones, up to its own prefill left."""
    pos = (~rs.is_decode).nonzero()[0]
    pos = pos[np.argsort(rs.ids[pos])]
    t, ids = pool.table, rs.ids[pos]
    rem = t.prefill_target[ids] - t.prefilled[ids]
    rank = rs.rank[pos]
    order = np.argsort(rank, kind="stable")  # grouped by rank, oldest first within a rank
    r_o, rem_o = rank[order], rem[order]
    before = np.cumsum(rem_o) - rem_o  # prefill left of the requests ahead, all ranks
    first = np.ones(r_o.shape[0], dtype=bool)
    first[1:] = r_o[1:] != r_o[:-1]
    start = np.maximum.accumulate(np.where(first, np.arange(r_o.shape[0]), 0))
    before -= before[start]  # ... of those ahead on the same rank
    chunks = np.empty_like(rem)
    chunks[order] = np.clip(budget.prefill_tokens[r_o] - before, 0, rem_o)
    np.subtract.at(budget.prefill_tokens, rank, chunks)
    return pos, chunks


def _grow(pool: Pool, rs: RunningSet, lo: int) -> IntArray | None:
    """Give decode requests whose KV crosses a page this step their new pages, or return the
    ranks (in the unit) that would overflow, changing nothing.

    A decode step writes 1 + d tokens, so a request needs ceil((ctx + d + state) / page) pages;
    comparing `kv` (ctx + d) against the room its pages hold avoids dividing for every request.
    """
    over = rs.kv > rs.room
    if rs.n_prefill:
        over &= rs.is_decode
    changed = over.nonzero()[0]
    if changed.shape[0] == 0:
        return None
    need = pool.kv.pages_for(rs.kv.take(changed))
    full = pool.kv.grow(lo, pool.ranks_per_unit, rs.rank.take(changed), need - rs.pages[changed])
    if full.shape[0]:
        return full
    rs.set_pages(changed, need)
    return None


def plan(pool: Pool, unit: int, rs: RunningSet) -> StepPlan | None:
    """What the unit computes next, or None when it holds and can admit nothing."""
    kv, R = pool.kv, pool.ranks_per_unit
    lo = unit * R
    if rs.n == 0 and not pool.has_queued(lo):
        return None
    if rs.n:
        full = _grow(pool, rs, lo)
        if full is not None:  # rare: preempt, then plan again without the victims
            _preempt(pool, rs, full)
            return plan(pool, unit, rs)
    free_pages = kv.free(slice(lo, lo + R))
    if pool.decode_reserve and rs.n:  # pages kept for the running requests' growth
        covered = np.where(rs.is_decode, rs.kv, pool.table.prefill_target[rs.ids])
        keep = pool.reserved_pages(rs.ids, covered, rs.pages)
        free_pages = free_pages - np.bincount(rs.rank, weights=keep, minlength=R).astype(np.int64)
    free_slots = pool.max_running - rs.per_rank
    ranks = pool.admissible(lo, free_pages, free_slots)
    pre_pos, chunks = _NONE, _NONE
    first = rs.n
    if ranks.shape[0] or rs.n_prefill:
        prefill = pool.prefill_budgets.copy()  # a copy: far cheaper than np.full
        if pool.shared_token_budget and rs.n:
            decoding = np.bincount(rs.rank[rs.is_decode], minlength=R) * (1 + pool.draft_tokens)
            prefill = np.maximum(pool.prefill_budget - decoding, 0)
        # both arrays were just computed (fresh copies): admission may spend them
        budget = RankBudget(
            free_pages=free_pages, free_slots=free_slots, prefill_tokens=prefill,
            whole_up_to=pool.prefill_budget if pool.whole_prompts else 0,
        )  # fmt: skip
        if rs.n_prefill:
            pre_pos, chunks = _continue_prefill(pool, rs, budget)
        new = pool.admit(lo, ranks, budget) if ranks.shape[0] else NONE_ADMITTED
        if new.n:
            rs.append(pool.table, new.ids, new.ranks, new.pages, new.to_decode)
            c = new.chunks
            go = c > 0
            if np.count_nonzero(go):
                pre_pos = np.concatenate([pre_pos, first + go.nonzero()[0]])
                chunks = np.concatenate([chunks, c[go]])
    decode_pos = rs.decode_rows() if rs.n_prefill else None
    waiting_pos = None
    prefills = bool(chunks.shape[0]) and bool(np.count_nonzero(chunks > 0))
    if decode_pos is not None and not pool.mixed_chunk and prefills:
        # a rank that prefills this step runs nothing else: its decode requests wait
        if isinstance(decode_pos, slice):
            decode_pos = np.arange(decode_pos.stop)
        busy = np.zeros(R, dtype=bool)
        busy[rs.rank[pre_pos[chunks > 0]]] = True
        sits = busy[rs.rank[decode_pos]]
        waiting_pos = decode_pos[sits]
        decode_pos = decode_pos[~sits]
    if _rows(decode_pos, rs.n) == 0 and not prefills:
        return None
    batch = _batch(pool, rs, decode_pos, pre_pos, chunks)
    counts = batch.segments_per_rank
    if counts is None:
        counts = np.bincount(batch.rank, minlength=R)
    return StepPlan(
        n=rs.n,
        decode_pos=decode_pos,
        prefill_pos=pre_pos,
        chunks=chunks,
        batch=batch,
        batch_per_rank=counts,
        admitted_from=first,
        waiting_pos=waiting_pos,
    )


def _read_only(a: NDArray[G]) -> NDArray[G]:
    v = a.view()
    v.flags.writeable = False
    return v


def _batch(
    pool: Pool, rs: RunningSet, dec: IntArray | slice | None, pre: IntArray, chunks: IntArray
) -> BatchShape:
    """The step's segments: decode rows first (in running-set order), then prefill chunks.

    Decode rows sample a token; a prefill chunk samples (prices lm_head) only when it reaches its
    prefill target: the prompt or, recomputing after preemption, prompt + generated tokens (the
    same test by which `apply_step` emits the token). A decode-only step hands the cost model
    read-only views of the running set's columns, valid until the step is applied. A step of
    every running request passes the running set's own count per rank with it.
    """
    sel = slice(None) if dec is None else leading(dec)
    rank, kv = rs.rank[sel], rs.kv[sel]
    n_dec = int(rank.shape[0])
    new_dec = rs.verify_width(n_dec)
    go = chunks > 0 if chunks.shape[0] else None
    if go is None or not np.count_nonzero(go):
        return BatchShape(
            num_ranks=pool.ranks_per_unit, rank=_read_only(rank), new_tokens=new_dec,
            kv_tokens=_read_only(kv), is_decode=rs.all_decode(n_dec),
            segments_per_rank=_counted(rs, n_dec),
        )  # fmt: skip
    pre, chunks = pre[go], chunks[go]
    ids = rs.ids[pre]
    reach = pool.table.prefilled[ids] + chunks  # the cache after this chunk
    size = n_dec + pre.shape[0]
    if isinstance(sel, slice) and size == rs.n and pre.tolist() == list(range(n_dec, size)):
        # every row in running-set order, the decode ones leading (a colocated step's usual
        # batch): its ranks and decode flags are the running set's own columns, not copies
        rank_all, is_decode = _read_only(rs.rank), _read_only(rs.is_decode)
    else:
        rank_all = np.concatenate([rank, rs.rank[pre]])
        is_decode = np.zeros(size, dtype=bool)
        is_decode[:n_dec] = True
    samples = is_decode.copy()
    samples[n_dec:] = reach >= pool.table.prefill_target[ids]
    return BatchShape(
        num_ranks=pool.ranks_per_unit,
        rank=rank_all,
        new_tokens=np.concatenate([new_dec, chunks]),
        kv_tokens=np.concatenate([kv, reach]),
        is_decode=is_decode,
        samples_token=samples,
        segments_per_rank=_counted(rs, n_dec + pre.shape[0]),
        decode_width=rs.width,
    )


def _counted(rs: RunningSet, segments: int) -> IntArray | None:
    """The running set's own count per rank (a read-only copy) where the step's `segments`
    are every running request, one each; None where the cost model must count them."""
    return _read_only(rs.per_rank.copy()) if segments == rs.n else None
