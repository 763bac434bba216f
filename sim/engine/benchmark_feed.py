"""The benchmark client as a feed: warm-up, then `num_prompts` requests through a semaphore.

It follows what SGLang's `bench_serving`, `vllm bench serve` and aiperf/genai-perf do (the
workload's docstring and docs/serving-overheads.md give the sources): request i of the
benchmark is scheduled at `start + gaps[:i].sum()` (all at `start` with an infinite rate), then
waits for one of `max_concurrency` slots, FIFO; a finished or refused request frees its slot.
The benchmark starts when the last warm-up request has finished (warm-up runs at the same
concurrency, all scheduled at 0). A request is sent at max(its schedule, the time its slot
freed); the engine sees it `ingress_s` later (tokenisation, HTTP) and the client sees its
tokens `egress_s` after the engine emits them (detokenisation, streaming), so a user's next
request is sent `egress_s` after its last token left the engine.

Lengths and gaps are drawn up front, so every deployment sees the same sequence of requests.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np

from sim.engine.arrivals import INF, NO_PIN, draw_lengths
from sim.engine.requests import IntArray, RequestTable
from sim.specs.workload import BenchmarkWorkload


class BenchmarkFeed:
    """Feeds a pool the benchmark client's requests; row id = request index (0..W-1 warm-up)."""

    fresh = True  # pop_until returns new table rows, consecutive and ascending

    def __init__(
        self,
        w: BenchmarkWorkload,
        rng: np.random.Generator,
        *,
        prefilled: bool = False,
        ingress_s: float = 0.0,
        egress_s: float = 0.0,
    ) -> None:
        self.w, self.prefilled = w, prefilled
        self.ingress_s, self.egress_s = ingress_s, egress_s
        self.warmup = w.warmup_requests
        self.total = w.total_requests
        self.inp, self.out, self.cached = draw_lengths(w, rng, self.total)
        n = w.num_prompts
        if np.isinf(w.request_rate):
            self.offsets = np.zeros(n)
        else:  # bench_serving sends the first at once, then sleeps an exponential gap
            self.offsets = np.concatenate(
                [[0.0], np.cumsum(rng.exponential(1 / w.request_rate, n - 1))]
            )
        slots = w.max_concurrency or self.total
        self._free: deque[float] = deque([0.0] * min(slots, self.total))  # when each slot freed
        self._next = 0  # index of the next request to send
        self._warm_done = 0
        self.bench_start_s: float | None = 0.0 if self.warmup == 0 else None
        self.send_s = np.full(self.total, np.nan)  # when the client sent each request
        self.delivered = 0
        self.on_push: Callable[[], None] | None = None

    # -- the client's clock ------------------------------------------------------------------
    def _send_time(self) -> float:
        """When the next request is sent (INF: not yet known, or none left)."""
        i = self._next
        if i >= self.total or not self._free:
            return INF
        if i < self.warmup:
            scheduled = 0.0
        elif self.bench_start_s is None:  # the benchmark waits for the whole warm-up
            return INF
        else:
            scheduled = self.bench_start_s + float(self.offsets[i - self.warmup])
        return max(scheduled, self._free[0])

    def next_time(self) -> float:
        return self._send_time() + self.ingress_s

    def finished(self, ids: IntArray, now: float) -> None:
        """Requests `ids` ended in the engine at `now`: their slots free when the client has
        read their last token."""
        seen = now + self.egress_s
        self._free.extend([seen] * int(ids.shape[0]))
        if self.bench_start_s is None:
            self._warm_done += int(np.count_nonzero(ids < self.warmup))
            if self._warm_done >= self.warmup:
                self.bench_start_s = seen
        if self.on_push is not None:
            self.on_push()

    def refused(self, ids: IntArray, pins: IntArray, now: float) -> None:
        """A refused request is a failed one: the client counts it and frees its slot."""
        self.finished(ids, now - self.egress_s)

    def pop_until(self, now: float, table: RequestTable) -> tuple[IntArray, IntArray]:
        times: list[float] = []
        while True:
            t = self._send_time()
            if t + self.ingress_s > now:
                break
            self._free.popleft()
            times.append(t)
            self._next += 1
        if not times:
            return NO_PIN, NO_PIN
        lo, hi = self._next - len(times), self._next
        sent = np.asarray(times)
        self.send_s[lo:hi] = sent
        ids = table.add(
            sent, self.inp[lo:hi], self.out[lo:hi], self.cached[lo:hi], prefilled=self.prefilled
        )
        self.delivered += hi - lo
        return ids, NO_PIN
