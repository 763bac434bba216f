"""`mla_layer` on segments of one dense path and one kind (a rank's decode requests, its
chunks) takes a short way past the masks that sort a mixed batch: the same ops, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost import layer_ops
from sim.cost.dispatch import ABSORB, EXPAND, EXPAND_CHUNKED
from sim.cost.layer_ops import RankSegments, mla_layer
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment

H200 = load_gpu("h200")
KINDS = [(ABSORB, True), (ABSORB, False), (EXPAND, False), (EXPAND, True), (EXPAND_CHUNKED, False)]


def segments(rng: np.random.Generator, path: int, decode: bool, n: int) -> RankSegments:
    q = rng.integers(1, 3, n) if decode else rng.integers(16, 6000, n)
    k = q + rng.choice([0, 0, 700, 20_000], n)
    return RankSegments(
        q=q.astype(np.float64),
        k=k.astype(np.float64),
        is_decode=np.full(n, decode),
        path=np.full(n, path, dtype=np.int8),
    )


@pytest.mark.parametrize("profile", ["h200-sglang", "h200-roofline"])
@pytest.mark.parametrize(("path", "decode"), KINDS)
def test_one_path_segments_price_as_the_general_way_does(
    path: int, decode: bool, profile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = Deployment(name="dp8", attn_tp=1, chunked_prefill_tokens=4096)
    model = ServingCostModel(load_model("deepseek-v3"), H200, d, load_profile(profile))
    rng = np.random.default_rng(path * 2 + decode)
    cases = [segments(rng, path, decode, n) for n in (1, 3, 17)]
    short = [mla_layer(model.pricer, model.ctx, s, projections) for s in cases
             for projections in (True, False)]  # fmt: skip
    assert layer_ops._one_dense_path(cases[0]) == (path, decode)
    monkeypatch.setattr(layer_ops, "_one_dense_path", lambda s: None)  # the general way
    general = [mla_layer(model.pricer, model.ctx, s, projections) for s in cases
               for projections in (True, False)]  # fmt: skip
    for a, b in zip(short, general, strict=True):
        assert list(a) == list(b)  # the same ops in the same order
        assert a == b  # and the same times, sources and flags, bit for bit
        assert any(t.seconds > 0 for t in a.values())


def test_mixed_or_empty_segments_take_the_general_way() -> None:
    rng = np.random.default_rng(3)
    dec, chunk = segments(rng, ABSORB, True, 4), segments(rng, EXPAND, False, 2)
    both = RankSegments(
        q=np.concatenate([dec.q, chunk.q]),
        k=np.concatenate([dec.k, chunk.k]),
        is_decode=np.concatenate([dec.is_decode, chunk.is_decode]),
        path=np.concatenate([dec.path, chunk.path]),
    )
    assert layer_ops._one_dense_path(both) is None
    two_paths = RankSegments(q=chunk.q, k=chunk.k, is_decode=chunk.is_decode,
                             path=np.array([EXPAND, ABSORB], dtype=np.int8))  # fmt: skip
    assert layer_ops._one_dense_path(two_paths) is None
    empty = RankSegments(q=dec.q[:0], k=dec.k[:0], is_decode=dec.is_decode[:0], path=dec.path[:0])
    assert layer_ops._one_dense_path(empty) is None
