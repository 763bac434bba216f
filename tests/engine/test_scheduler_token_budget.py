"""TensorRT-LLM's one token budget: a step's generation tokens come out of max_num_tokens
before its context chunks; SGLang and vLLM budget prefill tokens alone."""

from __future__ import annotations

import pytest
from fixed_cost import FixedCost, requests, run_trace, unit


@pytest.mark.parametrize(
    ("engine", "chunks"),
    [
        (None, [10, 64, 64, 64, 8]),
        ("sglang", [10, 64, 64, 64, 8]),
        ("trtllm", [10, 63, 63, 63, 11]),
    ],
)
def test_decode_tokens_share_the_trtllm_budget(engine: str | None, chunks: list[int]) -> None:
    # r0 (10-token prompt) decodes from step 2 on; r1's 200-token prompt arrives in step 1.
    # With a 64-token budget, TRT-LLM gives r1 64 - 1 tokens per step while r0 decodes.
    dep = unit(engine=engine, chunked_prefill_tokens=64)
    out = run_trace(dep, FixedCost(step_s=0.010), requests((0.0, 10, 10), (0.005, 200, 1)))
    # the remaining steps decode r0 alone
    assert list(out.cluster.pools[0].log.column("prefill_tokens")) == [*chunks, 0, 0, 0, 0, 0]
