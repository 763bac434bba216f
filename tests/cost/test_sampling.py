"""Sampling after the head: SGLang's passes over each logits row, priced by their bytes."""

from __future__ import annotations

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost import sampling as smp
from sim.cost.batch import BatchShape
from sim.cost.overlap import moe_layer_share
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment

V3, H200 = load_model("deepseek-v3"), load_gpu("h200")
H200_RL = load_profile("h200-roofline")


def model(engine: str | None = None) -> ServingCostModel:
    d = Deployment(name="dp", nodes=2, attn_tp=1, engine=engine)  # type: ignore[arg-type]
    return ServingCostModel(V3, H200, d, H200_RL)


def test_sglang_reads_and_writes_34_bytes_per_vocabulary_entry_in_five_kernels() -> None:
    """The FP32 cast (2 + 4), temperature (4 + 4), softmax (4 + 4) and its copy back (4 + 4),
    and the top-k/top-p sampling's read (4) of every entry of DeepSeek-V3's 129,280."""
    kernels = smp.sampling_kernels(V3.vocab_size, 256)
    assert len(kernels) == 5 and all(k.tokens == 256 and k.launched for k in kernels)
    assert sum(k.bytes_per_token for k in kernels) == 34 * 129_280
    step_bytes = sum(k.tokens * k.bytes_per_token for k in kernels)
    assert step_bytes == pytest.approx(1.125e9, rel=1e-3)  # 4.40 MB a row


def test_sampling_is_priced_by_its_bytes_at_the_profiles_roofline() -> None:
    cm = model()
    r = H200_RL.roofline
    bw = H200.hbm_bytes_per_s * r.memory_bandwidth_efficiency.value
    launch = r.launch_overhead_us.value * 1e-6
    t = smp.sampling(cm.pricer, cm.ctx, 256)
    assert t.source == "roofline"
    assert t.seconds == pytest.approx(256 * 34 * V3.vocab_size / bw + 5 * launch, rel=1e-6)
    assert 0.3e-3 < t.seconds < 0.6e-3  # a 256-row step: 0.39 ms on the H200 roofline
    more = smp.sampling(cm.pricer, cm.ctx, 512).seconds
    assert more - t.seconds == pytest.approx(256 * 34 * V3.vocab_size / bw, rel=1e-6)


def test_no_rows_sample_nothing_and_an_engine_prices_its_own_launches() -> None:
    cm = model()
    assert smp.sampling(cm.pricer, cm.ctx, 0).seconds == 0.0
    one_row = smp.sampling(cm.pricer, cm.ctx, 1).seconds
    sglang = model("sglang")
    assert smp.sampling(sglang.pricer, sglang.ctx, 1).seconds < one_row  # ~1.5 us, not 5.22


def test_sampling_runs_once_per_step_outside_the_overlapped_layers() -> None:
    assert moe_layer_share(V3, "sampling") == 0.0


def _decode_step(cm: ServingCostModel, per_rank: int, context: int = 2048) -> dict[str, float]:
    n = cm.deployment.attn_dp * per_rank
    rank = np.repeat(np.arange(cm.deployment.attn_dp), per_rank)
    batch = BatchShape(
        num_ranks=cm.deployment.attn_dp,
        rank=rank,
        new_tokens=np.ones(n, dtype=np.int64),
        kv_tokens=np.full(n, context, dtype=np.int64),
        is_decode=np.ones(n, dtype=bool),
        samples_token=np.ones(n, dtype=bool),
    )
    return {op: t.seconds for op, t in cm.step_cost(batch).ops.items()}


def test_an_sglang_step_samples_each_ranks_logits_rows_and_other_engines_do_not() -> None:
    """Under SGLang a decode step's `sampling` is the rank's rows through the five passes (the
    busiest rank's, as every op of the step's breakdown); vLLM's and TensorRT-LLM's samplers
    are not modelled, so their steps carry no such row."""
    sglang = model("sglang")
    ops = _decode_step(sglang, 64)
    assert ops["sampling"] == pytest.approx(smp.sampling(sglang.pricer, sglang.ctx, 64).seconds)
    assert _decode_step(sglang, 128)["sampling"] > ops["sampling"]
    for engine in ("vllm", "trtllm", None):
        assert "sampling" not in _decode_step(model(engine), 64)
