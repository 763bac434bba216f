"""Admission of queued requests onto a unit's ranks: FIFO rounds over the queues' heads.

`Pool.admit` runs `fifo_rounds` and applies the result (queue -> running, KV pages taken);
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

# pages `decode_reserve` keeps beyond `held` for requests `ids` whose pages cover `covered`
Reserve = Callable[[IntArray, IntArray, IntArray], IntArray]


@dataclass
class RankBudget:
    """What one step may still add on each rank of a unit."""

    free_pages: IntArray
    free_slots: IntArray
    prefill_tokens: IntArray


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


def fifo_rounds(
    q: RankQueues,
    t: RequestTable,
    lo: int,
    ranks: IntArray,
    budget: RankBudget,
    reserve: Reserve | None,
) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """(ids, ranks in the unit, pages, chunk) of the heads admitted on `ranks` (those that can
    take their first queued request), popped from the queues; `budget` is spent.

    Each round admits the head of every rank still admitting, if it fits the rank's free pages
    (less the pages `reserve` keeps for its own tokens to come), a free slot and (with prefill
    left) the rank's prefill budget; a rank stops at its first head that does not.
    """
    got: list[tuple[IntArray, IntArray, IntArray, IntArray]] = []
    cand = ranks
    while cand.shape[0]:
        g = cand + lo
        i, p, tok = q.head_ids[g], q.head_pages[g], q.head_tokens[g]
        need = p
        if reserve is not None:  # pages kept for its own tokens to come
            prompt = np.where(tok > 0, t.prefill_target[i], t.input_tokens[i] + t.generated[i])
            need = p + reserve(i, prompt, p)
        left = budget.prefill_tokens[cand]
        ok = (need <= budget.free_pages[cand]) & (budget.free_slots[cand] > 0)
        ok &= (tok == 0) | (left > 0)
        if not ok.all():
            cand, i, p, tok, need, left = (a[ok] for a in (cand, i, p, tok, need, left))
            if cand.shape[0] == 0:
                break
        c = np.minimum(tok, left)
        budget.prefill_tokens[cand] = left - c
        budget.free_pages[cand] -= need
        budget.free_slots[cand] -= 1
        got.append((i, cand, p, c))
        q.pop_heads(cand + lo)
        cand = cand[q.length[cand + lo] > 0]
    if not got:
        return _NONE, _NONE, _NONE, _NONE
    if len(got) == 1:
        return got[0]
    ids, on, pages, chunks = (np.concatenate(c) for c in zip(*got, strict=True))
    order = np.argsort(on, kind="stable")  # rank by rank; rounds are queue order
    return ids[order], on[order], pages[order], chunks[order]
