"""Where a pool's requests come from: feeds that a pool drains at each of its step boundaries.

Arrivals are never simpy processes of their own. Open-loop and trace arrivals are generated up
front with numpy; a pool calls `pop_until(now)` at each step start and routes everything that has
arrived. Feeds that grow during the run (closed-loop releases, PD transfers) call `on_push` so
that idle units of the consuming pool wake up.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sim.engine.lengths import cap_cached, sample_lengths
from sim.engine.requests import FloatArray, IntArray, RequestTable
from sim.specs.workload import BenchmarkWorkload, ClosedWorkload, GammaWorkload, PoissonWorkload

INF = float("inf")
NO_PIN = np.zeros(0, dtype=np.int64)
MAX_REFUSALS = 10_000  # closed loop: refusals in a row that stop the run (ClosedLoopFeed)


class WorkloadRefused(ValueError):
    """A closed loop's requests are refused one after another: they cannot fit the deployment."""


@dataclass(frozen=True)
class Batch:
    """Requests generated up front: arrival time and lengths, sorted by arrival."""

    arrival_s: FloatArray
    input_tokens: IntArray
    output_tokens: IntArray
    cached_tokens: IntArray

    def head(self, n: int) -> Batch:
        return Batch(
            self.arrival_s[:n], self.input_tokens[:n], self.output_tokens[:n],
            self.cached_tokens[:n],
        )  # fmt: skip


def draw_lengths(
    w: PoissonWorkload | GammaWorkload | ClosedWorkload | BenchmarkWorkload,
    rng: np.random.Generator,
    n: int,
) -> tuple[IntArray, IntArray, IntArray]:
    """(input, output, cached) tokens of `n` requests."""
    inp = sample_lengths(w.input, rng, n)
    out = np.maximum(sample_lengths(w.output, rng, n), 1)
    if w.prefix_cache_tokens is not None:
        cached = sample_lengths(w.prefix_cache_tokens, rng, n)
    else:
        cached = np.floor(inp * w.prefix_cache_fraction).astype(np.int64)
    return np.maximum(inp, 1), out, cap_cached(cached, np.maximum(inp, 1))


LENGTH_SAMPLE = 100_000  # draws behind `share_longer_than`: shares down to ~1e-4 show


def share_longer_than(
    w: PoissonWorkload | GammaWorkload | ClosedWorkload | BenchmarkWorkload, limit_tokens: int
) -> float:
    """Share of the workload's requests whose prompt + answer exceed `limit_tokens`, from a
    fixed-seed sample of its length distributions (the same for every run)."""
    inp, out, _ = draw_lengths(w, np.random.default_rng(0), LENGTH_SAMPLE)
    return float(np.count_nonzero(inp + out > limit_tokens)) / LENGTH_SAMPLE


def open_loop(
    w: PoissonWorkload | GammaWorkload,
    rng: np.random.Generator,
    duration_s: float | None,
    max_requests: int | None,
) -> Batch:
    """All arrivals before `duration_s` (and at most `max_requests`), with their lengths."""
    shape = 1.0 if isinstance(w, PoissonWorkload) else 1.0 / w.cv**2
    scale = 1.0 / (w.rate_req_s * shape)
    if max_requests is not None:
        gaps = rng.gamma(shape, scale, size=max_requests)
        t = np.cumsum(gaps)
    else:
        assert duration_s is not None
        chunks: list[FloatArray] = []
        last, block = 0.0, int(w.rate_req_s * duration_s * 1.1) + 64
        while last <= duration_s:
            c = last + np.cumsum(rng.gamma(shape, scale, size=block))
            chunks.append(c)
            last = float(c[-1])
        t = np.concatenate(chunks)
    if duration_s is not None:
        t = t[t < duration_s]
    inp, out, cached = draw_lengths(w, rng, t.shape[0])
    return Batch(t, inp, out, cached)


class ScheduledFeed:
    """Arrivals known in advance (open loop, trace); `prefilled` for a standalone decode pool."""

    fresh = True  # pop_until returns new table rows, consecutive and ascending

    def __init__(self, batch: Batch, *, prefilled: bool = False) -> None:
        self.batch = batch
        self.prefilled = prefilled
        self._next = 0
        self.on_push: Callable[[], None] | None = None
        self.delivered = 0

    def next_time(self) -> float:
        b = self.batch
        return float(b.arrival_s[self._next]) if self._next < b.arrival_s.shape[0] else INF

    def pop_until(self, now: float, table: RequestTable) -> tuple[IntArray, IntArray]:
        b = self.batch
        end = int(np.searchsorted(b.arrival_s, now, side="right"))
        if end <= self._next:
            return NO_PIN, NO_PIN
        sl = slice(self._next, end)
        self._next = end
        ids = table.add(
            b.arrival_s[sl], b.input_tokens[sl], b.output_tokens[sl], b.cached_tokens[sl],
            prefilled=self.prefilled,
        )  # fmt: skip
        self.delivered += ids.shape[0]
        return ids, NO_PIN


class ClosedLoopFeed:
    """A fixed number of requests in flight: each completion releases a new arrival at once, and
    so does each refusal (a request that can never fit: the user gets an error and moves on).
    A run of `MAX_REFUSALS` refusals in a row with none admitted between stops the run with
    WorkloadRefused: the workload's requests do not fit the deployment.

    With `pin_ranks`, the initial requests are spread evenly over the ranks and each replacement
    is pinned to the home rank of the request it replaces; otherwise the router places it.
    """

    fresh = True  # pop_until returns new table rows, consecutive and ascending

    def __init__(
        self,
        w: ClosedWorkload,
        rng: np.random.Generator,
        num_ranks: int,
        max_requests: int | None,
        *,
        prefilled: bool = False,
    ) -> None:
        self.w, self.rng, self.prefilled = w, rng, prefilled
        self.pinned = w.concurrency_per_rank is not None
        n0 = w.concurrency_per_rank * num_ranks if w.concurrency_per_rank else w.concurrency or 0
        self.limit = max_requests if max_requests is not None else None
        self.delivered = 0
        self.on_push: Callable[[], None] | None = None
        ramp = w.ramp_s / n0 if n0 else 0.0  # the first requests, spread evenly over the ramp
        self._pending_t: list[float] = [i * ramp for i in range(n0)]
        ranks = np.arange(n0, dtype=np.int64) % num_ranks
        self._pending_rank: list[int] = ranks.tolist() if self.pinned else [-1] * n0
        self._lengths: tuple[IntArray, IntArray, IntArray] | None = None
        self._used = 0
        self._refusals = 0  # requests refused in a row, none admitted between
        self._delivered_at_refusal = 0  # `delivered` when the last refusal was reported

    def _draw(self, n: int) -> tuple[IntArray, IntArray, IntArray]:
        """Next `n` request lengths, drawn in blocks so the sequence does not depend on timing."""
        if self._lengths is None or self._used + n > self._lengths[0].shape[0]:
            rest = (
                tuple(a[self._used :] for a in self._lengths) if self._lengths else None
            )  # fmt: skip
            block = draw_lengths(self.w, self.rng, max(4096, n))
            self._lengths = (
                tuple(np.concatenate([r, b]) for r, b in zip(rest, block, strict=True))  # type: ignore[assignment]
                if rest
                else block
            )
            self._used = 0
        assert self._lengths is not None
        out = tuple(a[self._used : self._used + n] for a in self._lengths)
        self._used += n
        return out  # type: ignore[return-value]

    def next_time(self) -> float:
        if not self._pending_t or (self.limit is not None and self.delivered >= self.limit):
            return INF
        return self._pending_t[0]

    def release(self, now: float, home_ranks: IntArray) -> None:
        """One new request per completed one, arriving `now` (before ramp arrivals still due)."""
        k, m = bisect_right(self._pending_t, now), home_ranks.shape[0]
        self._pending_t[k:k] = [now] * m
        self._pending_rank[k:k] = home_ranks.tolist() if self.pinned else [-1] * m
        if self.on_push is not None:
            self.on_push()

    def refused(self, ids: IntArray, pins: IntArray, now: float) -> None:
        """`ids` were refused at `now`: their users send their next requests at once. Every
        refusal is reported here, so the requests delivered since the last report and not
        refused now were admitted, and the run of refusals in a row starts again."""
        since = self.delivered - self._delivered_at_refusal  # this delivery included
        self._delivered_at_refusal = self.delivered
        n = ids.shape[0]
        self._refusals = n + (0 if since > n else self._refusals)
        if self._refusals >= MAX_REFUSALS:
            raise WorkloadRefused(
                f"closed loop: {self._refusals:,} requests in a row were refused (each needs "
                "more KV than one rank holds); shorten the workload's lengths or give the "
                "ranks more KV"
            )
        self.release(now, pins)

    def pop_until(self, now: float, table: RequestTable) -> tuple[IntArray, IntArray]:
        n = bisect_right(self._pending_t, now)  # pending times stay sorted
        if self.limit is not None:
            n = min(n, self.limit - self.delivered)
        if n <= 0:
            return NO_PIN, NO_PIN
        t = np.asarray(self._pending_t[:n])
        pins = np.asarray(self._pending_rank[:n], dtype=np.int64)
        del self._pending_t[:n], self._pending_rank[:n]
        inp, out, cached = self._draw(n)
        ids = table.add(t, inp, out, cached, prefilled=self.prefilled)
        self.delivered += n
        return ids, (pins if self.pinned else NO_PIN)


class TransferFeed:
    """PD: requests whose KV is on its way to the decode pool, released when it lands."""

    fresh = False  # pop_until returns earlier requests, in order of arrival

    def __init__(self) -> None:
        self._heap: list[tuple[float, int]] = []
        self.on_push: Callable[[], None] | None = None
        self.delivered = 0

    @property
    def in_flight(self) -> int:
        return len(self._heap)

    def push(self, done_s: FloatArray, ids: IntArray) -> None:
        for t, i in zip(done_s.tolist(), ids.tolist(), strict=True):
            heapq.heappush(self._heap, (t, i))
        if self.on_push is not None:
            self.on_push()

    def next_time(self) -> float:
        return self._heap[0][0] if self._heap else INF

    def pop_until(self, now: float, table: RequestTable) -> tuple[IntArray, IntArray]:
        out: list[int] = []
        while self._heap and self._heap[0][0] <= now:
            out.append(heapq.heappop(self._heap)[1])
        self.delivered += len(out)
        return np.asarray(out, dtype=np.int64), NO_PIN
