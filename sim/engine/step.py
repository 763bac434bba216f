"""What a finished step did: tokens emitted, prefill progress, requests that leave the unit.

Called once the step's time has passed. Decode requests gain 1 + accepted drafts (capped at their
output length); prefill requests gain their chunk, and those whose prefill completed emit their
first token. Requests that are done, or (PD) hand their KV to the decode pool, leave the unit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sim.cost.batch import StepCost
from sim.engine.log import StepRecord
from sim.engine.requests import EngineError
from sim.engine.running import RunningSet
from sim.engine.scheduler import StepPlan

if TYPE_CHECKING:
    from sim.engine.pool import Pool


def apply_step(
    pool: Pool, unit: int, rs: RunningSet, plan: StepPlan, start_s: float, now: float,
    cost: StepCost,
) -> StepRecord:  # fmt: skip
    """Advance every request in `plan` by one step and drop those that left from `rs`."""
    t, R = pool.table, pool.ranks_per_unit
    lo = unit * R
    if rs.n != plan.n:
        raise EngineError("the running set changed between planning and applying a step")
    leaving = np.zeros(rs.n, dtype=bool)
    progress = np.zeros(R, dtype=np.int64)  # tokens of work done per rank (router load)
    out_tokens = accept = 0
    nd = plan.n_decode
    if nd:
        dec = slice(None) if plan.decode_pos is None else plan.decode_pos
        acc = pool.sampler.accepted(nd)
        accept = int(acc.sum()) + nd
        gen, out = rs.gen[dec], rs.out[dec]
        if pool.first_token_in_decode:  # standalone decode pool: the first token comes from here
            t.first_token_s[rs.ids[dec][gen == 0]] = now
        emit = np.minimum(acc + 1, out - gen)  # acc is int8: the sum promotes to int64
        gen = gen + emit
        rs.gen[dec] = gen
        rs.ctx[dec] += emit
        out_tokens += int(emit.sum())
        progress += np.bincount(rs.rank[dec], weights=emit, minlength=R).astype(np.int64)
        leaving[dec] = gen >= out
    to_transfer = np.zeros(0, dtype=np.int64)
    if plan.prefill_pos.shape[0]:
        pos, chunks = plan.prefill_pos, plan.chunks
        ids = rs.ids[pos]
        t.prefilled[ids] += chunks
        progress += np.bincount(rs.rank[pos], weights=chunks, minlength=R).astype(np.int64)
        fin = t.prefilled[ids] >= t.prefill_target[ids]
        if fin.any():
            fpos = pos[fin]
            t.finish_prefill(ids[fin], now)
            rs.turned_decode(t, fpos)
            out_tokens += int(fpos.shape[0])
            progress += np.bincount(rs.rank[fpos], minlength=R)
            complete = rs.gen[fpos] >= rs.out[fpos]
            if pool.after_prefill == "done":  # a prefill-only pool: the first token ends it
                leaving[fpos] = True
            else:
                leaving[fpos[complete]] = True
            if pool.after_prefill == "transfer":  # PD: the rest continue in the decode pool
                to_transfer = fpos[~complete]
                leaving[to_transfer] = True
    pool.outstanding[lo : lo + R] -= progress
    if leaving.any():
        rs.sync(t, leaving.nonzero()[0])
        done = leaving.copy()
        if to_transfer.shape[0]:
            done[to_transfer] = False
            pool.hand_off(np.sort(rs.ids[to_transfer]), now)
        if done.any():
            pool.finish(np.sort(rs.ids[done]), now)
        rs.remove(leaving)
    return StepRecord(
        unit=unit,
        start_s=start_s,
        cost=cost,
        batch_per_rank=plan.batch_per_rank,
        decode_reqs=nd,
        prefill_tokens=int(plan.chunks.sum()),
        output_tokens=out_tokens,
        accept_tokens=accept,
        kv_pages=int(pool.kv.used[lo : lo + R].sum()),
    )
