"""A cost model with hand-checkable step times, for engine tests."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.cost.batch import BatchShape, OpTime, StepCost
from sim.engine import SimOutput, simulate
from sim.engine.arrivals import Batch
from sim.specs import Deployment, PdDeployment, RunSpec, TraceWorkload


@dataclass
class FixedCost:
    """step = step_s + slowest rank (prefill tokens x prefill_token_s + decode KV x kv_token_s).

    Rank r's attention time counts only its own segments, so one long context slows the whole
    lock-step unit through the max.
    """

    step_s: float = 0.01
    prefill_token_s: float = 0.0
    kv_token_s: float = 0.0
    capacity_tokens: int = 10**9
    bytes_per_token: float = 1000.0
    state_tokens: int = 0
    calls: int = 0

    @property
    def kv_capacity_tokens_per_rank(self) -> int:
        return self.capacity_tokens

    @property
    def kv_bytes_per_token(self) -> float:
        return self.bytes_per_token

    @property
    def state_tokens_per_request(self) -> int:
        return self.state_tokens

    def step_cost(self, batch: BatchShape) -> StepCost:
        self.calls += 1
        pre = np.where(batch.is_decode, 0, batch.new_tokens).astype(np.float64)
        dec_kv = np.where(batch.is_decode, batch.kv_tokens, 0).astype(np.float64)
        n = batch.num_ranks
        rank_s = (
            np.bincount(batch.rank, weights=pre, minlength=n) * self.prefill_token_s
            + np.bincount(batch.rank, weights=dec_kv, minlength=n) * self.kv_token_s
        )
        attn = float(rank_s.max())
        return StepCost(
            duration_s=self.step_s + attn,
            rank_own_s=rank_s,
            ops={
                "fixed": OpTime(seconds=self.step_s, source="published"),
                "attention": OpTime(seconds=attn, source="roofline"),
            },
        )


def requests(*rows: tuple[float, int, int]) -> Batch:
    """A trace of (arrival_s, input_tokens, output_tokens) rows, no prefix hits."""
    a = np.asarray(rows, dtype=np.float64).reshape(-1, 3)
    return Batch(
        arrival_s=a[:, 0],
        input_tokens=a[:, 1].astype(np.int64),
        output_tokens=a[:, 2].astype(np.int64),
        cached_tokens=np.zeros(a.shape[0], dtype=np.int64),
    )


TRACE = TraceWorkload(kind="trace", path="inline.csv")


def run_trace(
    dep: Deployment | PdDeployment,
    cost: FixedCost,
    batch: Batch,
    *,
    duration_s: float | None = None,
    nic_gb_s: float = 50.0,
) -> SimOutput:
    """Simulate `batch` until every request is done (or `duration_s`)."""
    run = RunSpec(duration_s=duration_s, max_requests=int(batch.arrival_s.shape[0]))
    return simulate(dep, lambda d: cost, TRACE, run, trace=batch, nic_gb_s=nic_gb_s)


def small_factory(model: object, gpu: object, dep: Deployment, profile: object) -> FixedCost:
    """The cost factory for `tests.builders.SMALL_TEXT`: attention time grows with the TP size."""
    return FixedCost(step_s=0.01, prefill_token_s=2e-6, kv_token_s=1e-8 * dep.attn_tp,
                     capacity_tokens=200_000)  # fmt: skip
