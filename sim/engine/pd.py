"""Prefill/decode disaggregation: the KV hand-off from the prefill pool to the decode pool.

When a request's prefill completes (its first token is out), its cache moves over RDMA:
transfer time = (prompt tokens + per-request state tokens) x KV bytes per token / bandwidth,
then the request arrives at the decode pool, whose router places it on a decode rank. The
prefill rank frees the KV when the transfer starts (transfers take milliseconds; a prefill pool
is rarely KV-bound), and transfers do not contend with each other for the link.
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
        self.total_s = 0.0

    def seconds(self, ids: IntArray) -> FloatArray:
        """Transfer time of each request's cache."""
        tokens = self.table.prefill_target[ids] + self.state_tokens
        return tokens.astype(np.float64) * self.seconds_per_token

    def send(self, ids: IntArray, now: float) -> None:
        dt = self.seconds(ids)
        self.sent += int(ids.shape[0])
        self.total_s += float(dt.sum())
        self.feed.push(now + dt, ids)
