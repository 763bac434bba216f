"""Which segments compute logits: decode rows always, a prefill chunk only when it completes."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.cost.batch import BatchShape, StepCost
from sim.cost.serving import ServingCostModel
from sim.engine import simulate
from sim.engine.arrivals import Batch
from sim.specs import Deployment, RunSpec
from tests.builders import unit
from tests.engine.fixed_cost import TRACE, FixedCost, requests, run_trace

Row = tuple[bool, int, int, bool]  # (is_decode, new tokens, kv tokens after, samples a token)


@dataclass
class SpyCost(FixedCost):
    """A fixed-cost model that keeps every step's segments."""

    steps: list[list[Row]] = field(default_factory=list)

    def step_cost(self, batch: BatchShape) -> StepCost:
        samples = batch.samples_token
        if samples is None:  # the contract: None means every segment samples
            samples = np.ones(batch.size, dtype=bool)
        rows = zip(
            batch.is_decode.tolist(), batch.new_tokens.tolist(), batch.kv_tokens.tolist(),
            samples.tolist(), strict=True,
        )  # fmt: skip
        self.steps.append(list(rows))
        return super().step_cost(batch)

    def prefill_rows(self) -> list[Row]:
        return [r for step in self.steps for r in step if not r[0]]


def test_a_chunked_prompt_samples_only_on_its_last_chunk() -> None:
    cost = SpyCost(step_s=0.010)
    run_trace(unit(chunked_prefill_tokens=64), cost, requests((0.0, 200, 3)))
    assert cost.steps == [
        [(False, 64, 64, False)],
        [(False, 64, 128, False)],
        [(False, 64, 192, False)],
        [(False, 8, 200, True)],
        [(True, 1, 201, True)],
        [(True, 1, 202, True)],
    ]


def test_decode_rows_sample_beside_a_partial_chunk() -> None:
    cost = SpyCost(step_s=0.010)
    run_trace(unit(chunked_prefill_tokens=64), cost, requests((0.0, 10, 4), (0.0, 100, 1)))
    # step 1: r0's whole prompt (10) and r1's first 54 tokens share the budget of 64
    assert cost.steps[0] == [(False, 10, 10, True), (False, 54, 54, False)]
    # step 2: r0 decodes (samples) while r1's last 46 tokens complete its prompt (samples)
    assert cost.steps[1] == [(True, 1, 11, True), (False, 46, 100, True)]


def test_a_cached_prefix_counts_toward_the_prompt() -> None:
    cost = SpyCost(step_s=0.010)
    batch = Batch(
        arrival_s=np.zeros(1),
        input_tokens=np.array([200]),
        output_tokens=np.array([1]),
        cached_tokens=np.array([100]),
    )
    run_trace(unit(chunked_prefill_tokens=64), cost, batch)
    # 100 cached, 100 to compute: 64 then 36; only the chunk that reaches 200 samples
    assert cost.prefill_rows() == [(False, 64, 164, False), (False, 36, 200, True)]


def test_recompute_after_preemption_samples_when_it_reaches_prompt_plus_generated() -> None:
    # as in test_engine_kv: two 150-token prompts fill 20 pages of 16 tokens, so decode growth
    # preempts the newer request, which recomputes prompt + generated tokens in 64-token chunks
    cost = SpyCost(step_s=0.010, capacity_tokens=20 * 16)
    out = run_trace(
        unit(page_size_tokens=16, chunked_prefill_tokens=64),
        cost,
        requests((0.0, 150, 30), (0.0, 150, 30)),
    )
    t = out.table
    assert t.preemptions[1] == 1 and t.prefill_target[1] == 159  # 150 + 9 generated
    assert cost.prefill_rows() == [
        (False, 64, 64, False),
        (False, 64, 128, False),
        (False, 22, 150, True),  # r0's prompt is complete; r1 starts in the same step
        (False, 42, 42, False),
        (False, 64, 106, False),
        (False, 44, 150, True),
        # r1 was preempted after 9 tokens; it recomputes 159 tokens once r0 is done
        (False, 64, 64, False),
        (False, 64, 128, False),
        (False, 31, 159, True),
    ]


def test_real_cost_model_prices_lm_head_on_the_final_chunk_only() -> None:
    model, gpu = load_model("deepseek-v3"), load_gpu("h200")
    dep = Deployment(name="tp8", attn_tp=8, moe_tp=8, chunked_prefill_tokens=64)
    batch = requests((0.0, 200, 1))
    run = RunSpec(duration_s=None, max_requests=1)
    out = simulate(dep, lambda d: ServingCostModel(model, gpu, d, None), TRACE, run, trace=batch)
    log = out.cluster.pools[0].log
    lm_head = log.op_seconds[:, log.op_names.index("lm_head")]
    assert list(log.column("prefill_tokens")) == [64, 64, 64, 8]
    assert lm_head[3] > 0  # the chunk that completes the prompt computes one logits row
    assert lm_head[:3] == pytest.approx([0.0, 0.0, 0.0])
