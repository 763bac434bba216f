"""Admission of queued requests onto a unit's ranks: FIFO on each rank within its budget.

`Pool.admit` runs `fifo_admit` and applies the result (queue -> running, KV pages taken);
the scheduler hands it the step's `RankBudget` and gets back what joined.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from sim.engine.queues import RankQueues
from sim.engine.requests import IntArray, RequestTable

_NONE = np.zeros(0, dtype=np.int64)
_NONE.flags.writeable = False

_WALK_RANKS = 2  # ranks still admitting after a round, at most, whose queues are walked

# pages `decode_reserve` keeps beyond `held` for requests `ids` whose pages cover `covered`
Reserve = Callable[[IntArray, IntArray, IntArray], IntArray]


@dataclass
class RankBudget:
    """What one step may still add on each rank of a unit."""

    free_pages: IntArray
    free_slots: IntArray
    prefill_tokens: IntArray
    # prefills of up to this many tokens join only whole, if the budget holds them (0: none)
    whole_up_to: int = 0


class Admitted(NamedTuple):
    """Requests admitted in one plan, rank by rank in queue order."""

    ids: IntArray
    ranks: IntArray  # rank in the unit
    pages: IntArray  # KV pages taken on admission
    chunks: IntArray  # prefill tokens this step; 0: already prefilled (a PD decode arrival)
    to_decode: np.ndarray  # straight to decode (prefilled)

    @property
    def n(self) -> int:
        return int(self.ids.shape[0])


NONE_ADMITTED = Admitted(_NONE, _NONE, _NONE, _NONE, np.zeros(0, dtype=bool))


def fifo_admit(
    q: RankQueues,
    t: RequestTable,
    lo: int,
    ranks: IntArray,
    budget: RankBudget,
    reserve: Reserve | None,
) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """(ids, ranks in the unit, pages, chunk) of the requests admitted on `ranks` (those that can
    take their first queued request), rank by rank in queue order, popped from the queues;
    `budget` is spent.

    Each rank admits its queue in order while the next request fits the rank's free pages (less
    the pages `reserve` keeps for its own tokens to come), a free slot and (with prefill left)
    the rank's prefill budget (some of it; all its prefill when that is at most `whole_up_to`:
    TensorRT-LLM's MicroBatchScheduler without context chunking), and stops at the first that
    does not (the same `break` in that scheduler). Ranks do not share a budget. Where nothing
    is reserved, admission runs in rounds over the queue heads, each a few array operations
    over every rank still admitting (`_admit_heads`): round j admits the j-th request of the
    ranks that took all j - 1 before it. A step usually needs one round (each arrival on its
    own empty queue, or a completion freeing one slot of a saturated rank); once at most
    `_WALK_RANKS` ranks admit more, the rest of their queues are walked (`_walk`: a round costs
    as much as walking a few requests).
    A unit of that few ranks (a tensor-parallel unit has one) walks its queues at once: a
    round over one rank's head costs more than walking it. With a reserve, each request's
    reserved pages depend on the request, and a loop over the few requests a step admits
    reads Python ints, not arrays (`_walk`).
    """
    if reserve is not None or budget.free_pages.shape[0] <= _WALK_RANKS:
        return _walk(q, t, lo, ranks, budget, reserve)
    rounds = []
    while True:
        got = _admit_heads(q, ranks + lo, ranks, budget)
        if got[0].shape[0] == 0:
            break
        rounds.append(got)
        ranks = got[1]  # the ranks that admitted: may they take their next one?
        g = ranks + lo
        more = (q.head_pages[g] <= budget.free_pages[ranks]) & (budget.free_slots[ranks] > 0)
        if not np.count_nonzero(more):
            break
        ranks = ranks[more]
        if ranks.shape[0] <= _WALK_RANKS:  # a few deep queues: walk them in Python
            rounds.append(_walk(q, t, lo, ranks, budget, None))
            break
    if len(rounds) <= 1:
        return rounds[0] if rounds else (_NONE, _NONE, _NONE, _NONE)
    # rank by rank, queue order within a rank: the rounds in order, sorted stably by rank
    ids, on, pages, chunks = (np.concatenate(cols) for cols in zip(*rounds, strict=True))
    order = np.argsort(on, kind="stable")
    return ids[order], on[order], pages[order], chunks[order]


def _walk(
    q: RankQueues,
    t: RequestTable,
    lo: int,
    ranks: IntArray,
    budget: RankBudget,
    reserve: Reserve | None,
) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """`fifo_admit` rank after rank, each rank's queue in order."""
    free, slots, left = (budget.free_pages.tolist(), budget.free_slots.tolist(),
                         budget.prefill_tokens.tolist())  # fmt: skip
    ids: list[int] = []
    on: list[int] = []
    pages: list[int] = []
    chunks: list[int] = []
    touched: list[int] = []
    counts: list[int] = []
    whole = budget.whole_up_to
    for r in ranks.tolist():
        f, s, b = free[r], slots[r], left[r]
        k = 0
        for i, p, tok in q.front(lo + r):
            need = p if reserve is None else p + _reserved(t, reserve, i, p, tok)
            if s <= 0 or need > f or (tok > 0 and (tok > b if tok <= whole else b <= 0)):
                break
            c = tok if tok < b else b
            f, s, b = f - need, s - 1, b - c
            ids.append(i)
            pages.append(p)
            chunks.append(c)
            k += 1
        if k:
            on.extend([r] * k)
            touched.append(r)
            counts.append(k)
            free[r], slots[r], left[r] = f, s, b
    if not ids:
        return _NONE, _NONE, _NONE, _NONE
    q.drop_fronts([r + lo for r in touched], counts)
    if len(touched) == 1:  # one rank (a tensor-parallel unit's): scalar writes
        r = touched[0]
        budget.free_pages[r], budget.free_slots[r], budget.prefill_tokens[r] = (
            free[r], slots[r], left[r]
        )  # fmt: skip
    else:
        at = np.array(touched, dtype=np.int64)  # an index array: numpy indexes by lists slowly
        budget.free_pages[at] = np.array([free[r] for r in touched], dtype=np.int64)
        budget.free_slots[at] = np.array([slots[r] for r in touched], dtype=np.int64)
        budget.prefill_tokens[at] = np.array([left[r] for r in touched], dtype=np.int64)
    return (np.array(ids, dtype=np.int64), np.array(on, dtype=np.int64),
            np.array(pages, dtype=np.int64), np.array(chunks, dtype=np.int64))  # fmt: skip


def _admit_heads(
    q: RankQueues, g: IntArray, ranks: IntArray, budget: RankBudget
) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """`fifo_admit` where each of `ranks` can admit at most its first queued request (it queues
    one, or has one free slot), whose pages and slot already fit (`RankQueues.admissible`): it
    joins unless it has prefill left and its rank's prefill budget is spent (or, for a prefill
    of at most `whole_up_to` tokens, cannot hold it whole), with a chunk of what the budget has
    left (`g`: `ranks` in the pool)."""
    ids, pages, chunks = q.heads(g)
    if np.count_nonzero(chunks):  # some have prefill left (else all join with chunk 0)
        left = budget.prefill_tokens[ranks]
        if budget.whole_up_to:
            whole = chunks <= budget.whole_up_to
            joins = (chunks == 0) | np.where(whole, chunks <= left, left > 0)
        else:
            joins = (chunks == 0) | (left > 0)
        if np.count_nonzero(joins) != joins.shape[0]:
            ranks, g, ids, pages, chunks, left = (
                a[joins] for a in (ranks, g, ids, pages, chunks, left)
            )
            if ranks.shape[0] == 0:
                return _NONE, _NONE, _NONE, _NONE
        chunks = np.minimum(chunks, left)
        budget.prefill_tokens[ranks] = left - chunks
    budget.free_pages[ranks] -= pages
    budget.free_slots[ranks] -= 1
    q.pop_heads(g)
    return ids, ranks, pages, chunks


def _reserved(t: RequestTable, reserve: Reserve, i: int, p: int, tok: int) -> int:
    """Pages `reserve` keeps for queued request i (p pages on admission, tok prefill tokens):
    the pages cover its prefill target, or (prefilled) its prompt and generated tokens."""
    covered = int(t.prefill_target[i]) if tok > 0 else int(t.input_tokens[i] + t.generated[i])
    one = np.array([i], dtype=np.int64)
    return int(reserve(one, np.array([covered], dtype=np.int64), np.array([p]))[0])
