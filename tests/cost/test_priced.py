"""The pricer's memos answer exactly what pricing afresh does, hit or miss."""

from __future__ import annotations

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.attention_ops import MlaDecode, Segments
from sim.cost.calibrated import CalibratedCost
from sim.cost.ops import Bmm, Elementwise, ElementwiseKernel, Gemm, Op
from sim.cost.pricing import Pricer
from sim.cost.roofline import RooflineCost

H200 = load_gpu("h200")


def pricer(est: CalibratedCost) -> Pricer:
    fb = RooflineCost(H200, 0.6, 0.7, 5e-6)
    return Pricer(H200, est, fallback=fb, mla=load_model("deepseek-v3").mla_spec)


@pytest.mark.parametrize("profile", ["h200-sglang", "h200-roofline"])  # tables; none
def test_memoised_times_equal_plain_pricing_and_weight_bytes_are_in_the_key(profile: str) -> None:
    est = CalibratedCost(load_profile(profile), H200)
    memo = pricer(est)
    rng = np.random.default_rng(3)
    seg = Segments(q=np.full(5, 2.0), k=rng.integers(100, 9000, 5).astype(float), cache_bytes=656)
    ops: list[tuple[Op, str]] = [
        (MlaDecode.over(seg, "fp8", 128), "bf16"),
        (Gemm(m=37.0, k=7168, n=2112), "fp8"),
        (Gemm(m=37.0, k=7168, n=2112, weight_excess=0.5), "fp8"),  # same table shape, more bytes
        (Bmm(m=64.0, k=128, n=512, batch=128), "bf16"),
        (Elementwise(tokens=300.0, width=7168), "bf16"),
        (ElementwiseKernel(tokens=300.0, width=7168), "bf16"),
    ]
    for _ in range(2):  # a miss, then a hit
        for op, dtype in ops:
            assert memo.price(op, dtype) == pricer(est).price(op, dtype), op  # vs a fresh one
    fp8_wide = [memo.price(op, d).seconds for op, d in ops[1:3]]
    assert fp8_wide[1] > fp8_wide[0]
    for m in (1.0, 37.0, 4096.0):  # rates too, at every shape, with or without a table
        op = Gemm(m=m, k=7168, n=2112)
        assert memo.rate(op, "fp8") == est.rate(op, "fp8")
