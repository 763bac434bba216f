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
from sim.engine.requests import EngineError, IntArray
from sim.engine.running import END, IDS, KV, PAGES, RANK, RunningSet, leading
from sim.engine.scheduler import StepPlan

if TYPE_CHECKING:
    from sim.engine.pool import Pool

_NONE = np.zeros(0, dtype=np.int64)


def _decode(
    pool: Pool, rs: RunningSet, plan: StepPlan, start_s: float, now: float
) -> tuple[int, int, IntArray]:
    """Advance the decode rows: (tokens emitted, untruncated accept tokens, positions done).

    Every row's `kv` moves by its full 1 + accepted drafts; rows that reach their `end` are done
    this step, and the tokens past it are not counted (their context is not read again).
    """
    nd, t = plan.n_decode, pool.table
    k = plan.admitted_from
    if pool.first_token_in_decode and k < plan.n:  # a decode pool: first tokens reach the
        # user from here, and only rows admitted in this plan can still lack one
        new = rs.ids[k:]
        first = np.isnan(t.first_token_s[new])
        if rs.n_prefill:
            first &= rs.is_decode[k:]
        new = new[first]
        # a PD request brings its first token from prefill: streamed as its first step starts;
        # a request arriving with its KV alone gets it from this step
        t.first_token_s[new] = np.where(t.generated[new] > 0, start_s, now)
    tok: IntArray | int = 1  # without drafts every row moves by one token
    accept = nd
    if pool.draft_tokens:
        acc = pool.sampler.accepted(nd)
        # one draft: acc is 0/1, so counting beats summing
        accept += int(np.count_nonzero(acc)) if pool.draft_tokens == 1 else int(acc.sum())
        tok = acc.astype(np.int64)  # a plain cast, far cheaper than a cast inside an add
        tok += 1
    pos = slice(None) if plan.decode_pos is None else leading(plan.decode_pos)
    if isinstance(pos, slice):  # the decode rows lead the running set: in place
        kv, end = rs.kv[pos], rs.end[pos]
        kv += tok
        done = (kv >= end).nonzero()[0]  # emitted the whole output, `over` tokens past it
        over = kv[done] - end[done]
    else:
        kv, end = rs.kv[pos] + tok, rs.end[pos]
        rs.kv[pos] = kv
        done_k = (kv >= end).nonzero()[0]
        over = kv[done_k] - end[done_k]
        done = pos[done_k]
    if done.shape[0] == 0:
        return accept, accept, done
    return accept - int(np.add.reduce(over)), accept, done


def _late_tokens(pool: Pool, rs: RunningSet, plan: StepPlan, step_s: float) -> None:
    """Unmixed chunks: rows that sat out earlier steps deliver after a longer gap (recorded
    apart for ITL); rows that sit this step out add it to their wait."""
    t = pool.table
    ids = rs.ids[: plan.n] if plan.decode_pos is None else rs.ids[plan.decode_pos]
    waited = t.waited_s[ids]
    late = waited > 0
    if np.count_nonzero(late):
        pool.late_gaps.append((pool.log.n, step_s + waited[late]))
        t.waited_s[ids[late]] = 0.0
    if plan.waiting_pos is not None and plan.waiting_pos.shape[0]:
        t.waited_s[rs.ids[plan.waiting_pos]] += step_s


def _leave(
    pool: Pool, rs: RunningSet, gone: IntArray, to_transfer: IntArray, lo: int, now: float
) -> None:
    """Requests at positions `gone` (ascending) leave: done, or (`to_transfer`) handed off.

    A leaving request has no prefill left, so its work left is its `left` output tokens.
    """
    t = pool.table
    xfer = np.sort(rs.ids[to_transfer]) if to_transfer.shape[0] else _NONE
    cols = rs.pop(gone)
    ids = cols[IDS]
    t.generated[ids] = t.output_tokens[ids] - np.maximum(cols[END] - cols[KV], 0)
    pool.release(cols[RANK] + lo, cols[PAGES])
    if xfer.shape[0]:
        pool.hand_off(xfer, now)
        done = np.setdiff1d(ids, xfer, assume_unique=True)
    else:
        done = np.sort(ids)
    if done.shape[0]:
        pool.finish(done, now)


def apply_step(
    pool: Pool, unit: int, rs: RunningSet, plan: StepPlan, start_s: float, now: float,
    cost: StepCost,
) -> StepRecord:  # fmt: skip
    """Advance every request in `plan` by one step and drop those that left from `rs`."""
    t, R = pool.table, pool.ranks_per_unit
    lo = unit * R
    if rs.n != plan.n:
        raise EngineError("the running set changed between planning and applying a step")
    out_tokens = accept = 0
    leaving = [_NONE]
    to_transfer = _NONE
    if not pool.mixed_chunk:
        _late_tokens(pool, rs, plan, now - start_s)
    if plan.n_decode:
        out_tokens, accept, done = _decode(pool, rs, plan, start_s, now)
        leaving.append(done)
    if plan.prefill_pos.shape[0]:
        pos, chunks = plan.prefill_pos, plan.chunks
        ids = rs.ids[pos]
        t.prefilled[ids] += chunks
        fin = t.prefilled[ids] >= t.prefill_target[ids]
        if np.count_nonzero(fin):
            fpos = pos[fin]
            t.finish_prefill(ids[fin], now)
            rs.turned_decode(t, fpos)
            out_tokens += int(fpos.shape[0])
            complete = rs.left_at(fpos) <= 0
            if pool.after_prefill == "done":  # a prefill-only pool: the first token ends it
                leaving.append(fpos)
            else:
                leaving.append(fpos[complete])
            if pool.after_prefill == "transfer":  # PD: the rest continue in the decode pool
                to_transfer = fpos[~complete]
                leaving.append(to_transfer)
    gone = np.concatenate(leaving) if len(leaving) > 1 else _NONE
    if gone.shape[0]:
        gone.sort()
        _leave(pool, rs, gone, to_transfer, lo, now)
    return StepRecord(
        unit=unit,
        start_s=start_s,
        cost=cost,
        batch_per_rank=plan.batch_per_rank,
        decode_reqs=plan.n_decode,
        prefill_tokens=int(np.add.reduce(plan.chunks)) if plan.chunks.shape[0] else 0,
        output_tokens=out_tokens,
        accept_tokens=accept,
        kv_pages=int(pool.kv.used[lo]) if R == 1 else int(pool.kv.used[lo : lo + R].sum()),
    )
