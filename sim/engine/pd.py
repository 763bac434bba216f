"""Prefill/decode disaggregation: the KV hand-off from the prefill pool to the decode pool.

When a request's prefill completes (its first token is out), its cache moves over RDMA:
transfer time = (prompt tokens + per-request state tokens) x KV bytes per token / bandwidth,
then the request arrives at the decode pool, whose router places it on a decode rank. The
prefill rank frees the KV when the transfer starts (a prefill pool is rarely KV-bound). The
caches one prefill rank sends share its link: they go one after another (in request order when
several leave in the same step), so a burst of short prompts, or a slow link, queues.

The first token is sampled by the prefill pool but reaches the user from the decode pool, which
streams the reply once the request has a slot: its TTFT ends with the decode pool's first step
for it, so a wait for a decode slot counts as time to first token, not as time per token.
"""

from __future__ import annotations

import numpy as np

from sim.engine.arrivals import TransferFeed
from sim.engine.requests import FloatArray, IntArray, RequestTable


class KvTransfer:
    """Sends prefilled requests to the decode pool's feed after their transfer time."""

    def __init__(
        self,
        table: RequestTable,
        feed: TransferFeed,
        *,
        kv_bytes_per_token: float,
        state_tokens: int,
        bandwidth_bytes_s: float,
    ) -> None:
        if bandwidth_bytes_s <= 0:
            raise ValueError("KV transfer bandwidth must be positive")
        self.table, self.feed = table, feed
        self.seconds_per_token = kv_bytes_per_token / bandwidth_bytes_s
        self.state_tokens = state_tokens
        self.sent = 0
        self.total_s = 0.0  # hand-off to arrival, summed: link queueing included
        self._link_free_s = np.zeros(0)  # per prefill rank: when its link is next free

    def seconds(self, ids: IntArray) -> FloatArray:
        """Transfer time of each request's cache on an idle link."""
        tokens = self.table.prefill_target[ids] + self.state_tokens
        return tokens.astype(np.float64) * self.seconds_per_token

    def send(self, ids: IntArray, now: float) -> None:
        """Queue `ids` (ascending) on their prefill ranks' links; each lands when its turn on
        the link ends."""
        if ids.shape[0] == 0:
            return
        ranks = self.table.home_rank[ids]  # the prefill rank each was served on
        assert int(ranks.min()) >= 0, "a prefilled request without its prefill rank"
        if int(ranks.max()) >= self._link_free_s.shape[0]:
            grown = np.zeros(int(ranks.max()) + 1)
            grown[: self._link_free_s.shape[0]] = self._link_free_s
            self._link_free_s = grown
        order = np.argsort(ranks, kind="stable")  # by rank, request order within a rank
        r, dt = ranks[order], self.seconds(ids)[order]
        first = np.flatnonzero(np.r_[True, r[1:] != r[:-1]])  # where each rank's run starts
        counts = np.diff(np.r_[first, r.shape[0]])
        done = np.cumsum(dt)
        done -= np.repeat(done[first] - dt[first], counts)  # link time used within each rank
        start = np.maximum(now, self._link_free_s[r[first]])
        end = np.repeat(start, counts) + done
        self._link_free_s[r[first]] = end[first + counts - 1]
        self.sent += int(ids.shape[0])
        self.total_s += float((end - now).sum())
        self.table.first_token_s[ids] = np.nan  # streamed by the decode pool (module docstring)
        self.feed.push(end, ids[order])
