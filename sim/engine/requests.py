"""Every request of one run as numpy columns, and the only methods that change its phase.

A request moves QUEUED -> PREFILL -> DECODE -> DONE (PD adds TRANSFER between PREFILL and the
decode pool's QUEUED; a request whose KV can never fit is REJECTED on arrival; recompute
preemption sends PREFILL/DECODE back to QUEUED). Transition methods take arrays of request ids,
check the source phase and raise `EngineError` on an illegal move, so the engine's bookkeeping
errors surface where they happen.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np
from numpy.typing import NDArray

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


class EngineError(RuntimeError):
    """The engine's own state became inconsistent (a bug, not a user error)."""


class Phase(IntEnum):
    QUEUED = 0  # routed to a rank, waiting for admission
    PREFILL = 1  # admitted, prompt (or recompute) being computed in chunks
    DECODE = 2  # generating tokens
    TRANSFER = 3  # PD: KV on its way from the prefill pool to the decode pool
    DONE = 4
    REJECTED = 5  # could never fit in one rank's KV cache


# plain ints for hot paths (IntEnum attribute access is slow in tight loops)
QUEUED, PREFILL, DECODE, TRANSFER, DONE, REJECTED = (int(p) for p in Phase)

_ADMITTED = np.array([PREFILL, DECODE], dtype=np.int8)  # phase on admission, by "prefilled"
_ADMITTED.flags.writeable = False

_INT_COLS = (
    "input_tokens", "output_tokens", "cached_tokens", "generated", "prefilled",
    "prefill_target", "kv_pages", "rank", "home_rank", "preemptions",
)  # fmt: skip
_FLOAT_COLS = ("arrival_s", "first_token_s", "finish_s", "waited_s")
_NO_RANK = ("rank", "home_rank")


class RequestTable:
    """Struct of arrays, one row per arrived request; row index = request id (arrival order).

    `prefill_target` is how many tokens the current prefill must reach (the prompt, or prompt +
    generated tokens when recomputing after preemption); `prefilled` counts tokens already in the
    cache (cached prefix included). `kv_pages` is the KV the request holds on its current rank.
    """

    def __init__(self, capacity: int = 1024) -> None:
        self.size = 0
        self._cap = max(capacity, 16)
        for name in _INT_COLS:  # no rank yet: rows start at -1, so `add` need not write them
            fill = -1 if name in _NO_RANK else 0
            setattr(self, name, np.full(self._cap, fill, dtype=np.int64))
        for name in _FLOAT_COLS:
            setattr(self, name, np.full(self._cap, np.nan))
        self.phase = np.zeros(self._cap, dtype=np.int8)
        self._allowed: dict[tuple[int, ...], NDArray[np.bool_]] = {}
        self.input_tokens: IntArray
        self.output_tokens: IntArray
        self.cached_tokens: IntArray
        self.generated: IntArray
        self.prefilled: IntArray
        self.prefill_target: IntArray
        self.kv_pages: IntArray
        self.rank: IntArray
        self.home_rank: IntArray
        self.preemptions: IntArray
        self.arrival_s: FloatArray
        self.first_token_s: FloatArray
        self.waited_s: FloatArray
        self.finish_s: FloatArray

    def _grow(self, need: int) -> None:
        cap = self._cap
        while cap < need:
            cap *= 2
        for name in (*_INT_COLS, *_FLOAT_COLS, "phase"):
            old = getattr(self, name)
            if name in _FLOAT_COLS:
                new = np.full(cap, np.nan)
            elif name in _NO_RANK:
                new = np.full(cap, -1, dtype=old.dtype)
            else:
                new = np.zeros(cap, dtype=old.dtype)
            new[: self.size] = old[: self.size]
            setattr(self, name, new)
        self._cap = cap

    def add(
        self,
        arrival_s: FloatArray,
        input_tokens: IntArray,
        output_tokens: IntArray,
        cached_tokens: IntArray,
        *,
        prefilled: bool = False,
    ) -> IntArray:
        """Append arrived requests (phase QUEUED, no rank yet); returns their ids.

        `prefilled` marks requests whose prompt KV is already present (a standalone decode pool).
        """
        n = int(arrival_s.shape[0])
        if self.size + n > self._cap:
            self._grow(self.size + n)
        ids = np.arange(self.size, self.size + n, dtype=np.int64)
        sl = slice(self.size, self.size + n)
        self.arrival_s[sl] = arrival_s
        self.input_tokens[sl] = input_tokens
        self.output_tokens[sl] = output_tokens
        self.cached_tokens[sl] = cached_tokens
        self.prefill_target[sl] = input_tokens
        self.prefilled[sl] = input_tokens if prefilled else cached_tokens
        self.waited_s[sl] = 0.0  # decode steps sat out since the last token (unmixed chunks)
        self.size += n  # rank and home_rank start at -1, phase at QUEUED (0)
        return ids

    # -- transitions ---------------------------------------------------------------------------
    def _expect(self, ids: IntArray | slice, *allowed: int, action: str) -> None:
        ok = self._allowed.get(allowed)
        if ok is None:  # phases a transition accepts, as a lookup table over phase codes
            ok = self._allowed[allowed] = np.isin(np.arange(len(Phase)), allowed)
        one = _one(ids)
        if one is not None and ok[self.phase[one]]:  # one request (most steps): scalar reads
            return
        legal = ok[self.phase[ids]]
        if np.count_nonzero(legal) != legal.shape[0]:  # count_nonzero: far cheaper than all()
            bad = ~legal
            i = int(np.arange(self.size)[ids][np.argmax(bad)])
            names = "/".join(Phase(p).name for p in allowed)
            raise EngineError(
                f"cannot {action} request {i}: it is {Phase(int(self.phase[i])).name}, "
                f"expected {names}"
            )

    def route(self, ids: IntArray | slice, ranks: IntArray) -> None:
        """Place arrived (or transferred) requests in their rank's queue."""
        self._expect(ids, QUEUED, TRANSFER, action="route")
        self.rank[ids] = ranks
        self.phase[ids] = QUEUED

    def reject(self, ids: IntArray) -> None:
        self._expect(ids, QUEUED, TRANSFER, action="reject")
        self.phase[ids] = REJECTED
        self.rank[ids] = -1

    def admit(self, ids: IntArray, pages: IntArray) -> np.ndarray:
        """Queue -> running, holding `pages` of KV: PREFILL if tokens remain, else DECODE.

        Returns which of them go straight to DECODE.
        """
        self._expect(ids, QUEUED, action="admit")
        self.kv_pages[ids] = pages
        dec = self.prefilled[ids] >= self.prefill_target[ids]
        self.phase[ids] = _ADMITTED[dec.view(np.int8)]
        return dec

    def finish_prefill(self, ids: IntArray, now: float) -> None:
        """The prefill's last chunk ran: the step emitted one token."""
        self._expect(ids, PREFILL, action="finish prefill of")
        self.generated[ids] += 1
        first = self.first_token_s[ids]
        self.first_token_s[ids] = np.where(np.isnan(first), now, first)
        self.phase[ids] = DECODE

    def start_transfer(self, ids: IntArray) -> None:
        self._expect(ids, DECODE, action="transfer")
        self.phase[ids] = TRANSFER
        self.kv_pages[ids] = 0
        self.rank[ids] = -1

    def complete(self, ids: IntArray, now: float) -> None:
        self._expect(ids, DECODE, action="complete")
        self.phase[ids] = DONE
        self.finish_s[ids] = now
        self.kv_pages[ids] = 0

    def preempt(self, ids: IntArray) -> None:
        """Drop the request's KV; it re-queues and will recompute prompt + generated tokens."""
        self._expect(ids, PREFILL, DECODE, action="preempt")
        self.phase[ids] = QUEUED
        self.kv_pages[ids] = 0
        self.prefill_target[ids] = self.input_tokens[ids] + self.generated[ids]
        self.prefilled[ids] = np.minimum(self.cached_tokens[ids], self.prefill_target[ids] - 1)
        self.preemptions[ids] += 1
        self.waited_s[ids] = 0.0  # its next token comes from the recompute, not a decode step

    # -- queries -------------------------------------------------------------------------------
    def remaining_tokens(self, ids: IntArray) -> IntArray:
        """Tokens still to compute: prefill left plus output left (what routers balance)."""
        return (
            self.prefill_target[ids]
            - self.prefilled[ids]
            + self.output_tokens[ids]
            - self.generated[ids]
        )

    def phase_counts(self) -> dict[Phase, int]:
        counts = np.bincount(self.phase[: self.size], minlength=len(Phase))
        return {p: int(counts[p]) for p in Phase}


def _one(ids: IntArray | slice) -> int | None:
    """The one request `ids` names (an index array of one, or a slice of one), else None."""
    if isinstance(ids, slice):
        lo, hi = ids.start, ids.stop
        return lo if lo is not None and hi is not None and hi - lo == 1 else None
    return int(ids[0]) if ids.shape[0] == 1 else None
