"""An MTP verify's attention core (two query tokens per request): read from FlashMLA measured at
two query tokens where a profile holds that table, and never below one query token over the
same caches, which the kernel reads either way."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from kernels_calib import published_figures as fig
from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.attention_ops import MlaDecode, Segments
from sim.cost.calibrated import CalibratedCost
from sim.cost.layer_ops import mla_decode
from sim.cost.pricing import Pricer

V3 = load_model("deepseek-v3")
BF16_LATENT_BYTES = 576 * 2  # one cached token of one layer, BF16


def pricer(profile: str, gpu: str) -> Pricer:
    g = load_gpu(gpu)
    return Pricer(g, CalibratedCost(load_profile(profile), g), mla=V3.mla_spec)


def requests(batch: int, kv: int, s_q: int) -> Segments:
    return Segments(
        q=np.full(batch, float(s_q)), k=np.full(batch, float(kv)), cache_bytes=BF16_LATENT_BYTES
    )


@pytest.mark.parametrize(
    ("profile", "gpu"), [("h800-published", "h800"), ("h200-roofline", "h200")]
)
def test_a_verify_costs_no_less_than_one_token_over_the_same_caches(profile: str, gpu: str) -> None:
    pr = pricer(profile, gpu)
    for b, kv in itertools.product((1, 4, 16, 64, 128, 256), (1024, 4096, 16384)):
        one = mla_decode(pr, requests(b, kv, 1), "bf16", 128.0)
        two = mla_decode(pr, requests(b, kv, 2), "bf16", 128.0)
        assert two.seconds >= one.seconds, (b, kv)


def test_the_measured_table_prices_its_points_and_the_floor_only_small_batches() -> None:
    pr = pricer("h800-published", "h800")
    batch = fig.FLASHMLA_H100_VERIFY_BATCH
    for kv, us in fig.FLASHMLA_H100_VERIFY_US.items():
        at = mla_decode(pr, requests(batch, kv, 2), "bf16", 128.0)
        assert at.seconds * 1e6 == pytest.approx(us, rel=1e-9)
        assert "one-token floor" not in at.detail
    # batch 1, 1K: the two-token table (batch 128 only) read that far off its grid prices the
    # verify under the one-token kernel's fixed latency; the floor takes the one-token time
    small = requests(1, 1024, 2)
    raw = pr.price(MlaDecode.over(small, "bf16", 128.0))
    floored = mla_decode(pr, small, "bf16", 128.0)
    one = mla_decode(pr, requests(1, 1024, 1), "bf16", 128.0)
    assert raw.seconds < one.seconds == floored.seconds
    assert floored.extrapolated and "one-token floor" in floored.detail
