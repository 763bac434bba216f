"""What a compiled inner loop would buy the engine's per-request arithmetic (issue #24).

The decode hour's target (6 s of CPU: ~185 us a step, engine and cost model together) is below
what the engine's numpy passes over its ~17,500 running requests take alone. This script times
one step's per-request arithmetic, written the two ways, on arrays of the decode hour's size
(144 ranks x ~122 requests, rows sorted by rank: the stand-in's order, not the running
set's, which keeps rows in admission order with holes filled from its end):

- `numpy_pass`: as the engine and the cost model do it, one numpy call per operation: each
  row's tokens (1 + its MTP draft, accepted when its 32-bit draw is below the threshold), the
  rows done and the tokens past their end, KV pages grown to the new context, and the per-rank
  request counts and context sums the cost model shapes ranks by;
- `_loop`: the same arithmetic in one loop over the rows, compiled by numba (not a
  dependency of the project: `pip install numba` to time it; without it only numpy runs).

Both return the same integers (checked). CPU time (`time.process_time`), best of `--repeat`
blocks of `--steps` passes, each pass on the next slice of a stream of draws as the engine's
`DrawStream` hands them out. A stand-in: the engine's passes are split over several modules
and include their bookkeeping; this measures the arithmetic they share.

    python bench/compiled_pass.py
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import time
from collections.abc import Callable
from typing import Any

import numpy as np

RANKS, PER_RANK, PAGE = 144, 122, 64
ACCEPT_BELOW = int(np.ceil(0.8 * 2**24)) << 8  # a draft accepted with p = 0.8 (`DraftSampler`)


def numpy_pass(
    kv: np.ndarray, end: np.ndarray, pages: np.ndarray, rank: np.ndarray, draws: np.ndarray
) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(tokens emitted, rows done, pages added per rank, context sum per rank, rows per rank),
    updating `kv` and `pages` in place."""
    tok = (draws < ACCEPT_BELOW).astype(np.int64)
    tok += 1
    kv += tok
    done = (kv >= end).nonzero()[0]
    emitted = int(tok.sum()) - int((kv[done] - end[done]).sum())
    need = (kv + PAGE - 1) // PAGE
    grow = (need > pages).nonzero()[0]
    added = np.bincount(rank[grow], weights=need[grow] - pages[grow], minlength=RANKS)
    pages[grow] = need[grow]
    kv_sum = np.bincount(rank, weights=kv, minlength=RANKS).astype(np.int64)
    return emitted, done, added.astype(np.int64), kv_sum, np.bincount(rank, minlength=RANKS)


def _loop(kv, end, pages, rank, draws):  # type: ignore[no-untyped-def]
    """`numpy_pass` as one loop over the rows (compiled by numba: the module's constants are
    frozen into it, so the page division is a shift). The stand-in's rows are sorted by rank,
    so each rank's sums are kept in registers over its run of rows and stored once."""
    n = kv.shape[0]
    done = np.empty(n, np.int64)
    added = np.zeros(RANKS, np.int64)
    kv_sum = np.zeros(RANKS, np.int64)
    count = np.zeros(RANKS, np.int64)
    emitted, n_done, i = 0, 0, 0
    while i < n:
        r, grown, ctx, rows = rank[i], 0, 0, 0
        while i < n and rank[i] == r:
            t = 2 if draws[i] < ACCEPT_BELOW else 1
            k = kv[i] + t
            kv[i] = k
            emitted += t
            if k >= end[i]:
                done[n_done] = i
                n_done += 1
                emitted -= k - end[i]
            need = (k + PAGE - 1) // PAGE
            if need > pages[i]:
                grown += need - pages[i]
                pages[i] = need
            ctx += k
            rows += 1
            i += 1
        added[r] += grown
        kv_sum[r] += ctx
        count[r] += rows
    return emitted, done[:n_done], added, kv_sum, count


def arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = RANKS * PER_RANK
    rank = np.sort(rng.integers(0, RANKS, n)).astype(np.int64)
    kv = rng.integers(500, 6000, n).astype(np.int64)
    # each row 1-1,799 tokens from its end: ~18 rows finish in a pass, as ~20 finish in a step
    # of the decode hour (635,204 completions in 32,397 steps)
    end = kv + rng.integers(1, 1800, n)
    return {"rank": rank, "kv": kv, "end": end, "pages": (kv + PAGE - 1) // PAGE}


def keep_freed_memory() -> bool:
    """Ask glibc to keep freed memory (no trim below 64 MiB, no mmap under 4 MiB); whether it
    could. A pass's ~140 KB temporaries otherwise come and go as fresh pages at the top of the
    heap in some runs: ~70 minor page faults a pass, the numpy figure doubled (287-333 against
    148-155 us here), which the engine's run does not pay (its faults stay ~54k in all)."""
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # glibc's malloc.h
    return bool(mallopt(m_trim_threshold, 64 << 20) and mallopt(m_mmap_threshold, 4 << 20))


def best_us(run: Callable[[np.ndarray, np.ndarray, np.ndarray], Any], a: dict[str, np.ndarray],
            stream: np.ndarray, steps: int, repeat: int) -> float:  # fmt: skip
    """Best of `repeat` blocks of `steps` passes, CPU us a pass. Each pass starts from the
    arrays' own state (restored between passes, untimed), so that rows done stay few."""
    n, best = a["kv"].shape[0], float("inf")
    kv, pages = a["kv"].copy(), a["pages"].copy()
    for _ in range(repeat):
        total = 0.0
        for s in range(steps):
            np.copyto(kv, a["kv"])
            np.copyto(pages, a["pages"])
            draws = stream[(s * n) % (stream.shape[0] - n) :][:n]
            c0 = time.process_time()
            run(kv, pages, draws)
            total += time.process_time() - c0
        best = min(best, total / steps * 1e6)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    kept = keep_freed_memory()
    a = arrays()
    n = a["kv"].shape[0]
    stream = np.random.default_rng(1).integers(0, 2**32, n * 64, dtype=np.uint32)
    print(f"rows {n:,} ({RANKS} ranks x {PER_RANK}), {args.steps} passes, best of {args.repeat}; "
          f"freed memory kept: {'yes' if kept else 'no (not glibc)'}")  # fmt: skip
    us = best_us(lambda kv, pg, d: numpy_pass(kv, a["end"], pg, a["rank"], d), a, stream,
                 args.steps, args.repeat)  # fmt: skip
    print(f"numpy    : {us:7.1f} us CPU a pass")
    c0 = time.process_time()
    try:
        import numba
    except ImportError:
        print("compiled : numba is not installed (pip install numba to time the compiled loop)")
        return
    imported = time.process_time() - c0
    loop = numba.njit(_loop)
    want = numpy_pass(a["kv"].copy(), a["end"], a["pages"].copy(), a["rank"], stream[:n])
    c0 = time.process_time()
    got = loop(a["kv"].copy(), a["end"], a["pages"].copy(), a["rank"], stream[:n])
    compiled = time.process_time() - c0
    pairs = zip(want[1:], got[1:], strict=True)
    same = want[0] == got[0] and all(np.array_equal(x, y) for x, y in pairs)
    if not same:
        raise SystemExit("compiled loop and numpy pass differ")
    cus = best_us(lambda kv, pg, d: loop(kv, a["end"], pg, a["rank"], d), a, stream, args.steps,
                  args.repeat)  # fmt: skip
    print(f"compiled : {cus:7.1f} us CPU a pass ({us / cus:.1f}x; numba {numba.__version__}: "
          f"import {imported:.2f} s, first call with compilation {compiled:.2f} s CPU); "
          "results identical")  # fmt: skip


if __name__ == "__main__":
    main()
