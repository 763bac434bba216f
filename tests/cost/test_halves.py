"""A shape's two-batch-overlap halves split at the level of its decode groups (`halves`) are
the halves split one request at a time (`halves_by_segments`), to the last bit and type."""

from __future__ import annotations

import numpy as np

from sim.cost.dispatch import ABSORB, EXPAND, EXPAND_CHUNKED
from sim.cost.mixed_halves import halves, halves_by_segments
from sim.cost.mixed_shape import MixedShape


def random_shape(rng: np.random.Generator) -> MixedShape:
    """0-3 decode groups (distinct path and width, 1-60 requests, contexts that sometimes tie)
    and 1-6 chunks at 2^(1/64) centres, on mixed paths, some sampling."""
    keys = [(ABSORB, 1.0), (ABSORB, 2.0), (EXPAND, 2.0), (ABSORB, 4.0)]
    picked = rng.choice(len(keys), int(rng.integers(0, 4)), replace=False)
    ties = [float(rng.integers(100, 5000)) for _ in range(2)]
    decode = []
    for i in sorted(picked.tolist()):
        ctx = ties[int(rng.integers(0, 2))] if rng.random() < 0.3 else float(rng.uniform(50, 9000))
        decode.append((keys[i][0], keys[i][1], int(rng.integers(1, 61)), ctx))
    chunks = []
    for _ in range(int(rng.integers(1, 7))):
        new = 2.0 ** (int(rng.integers(0, 13 * 64)) / 64)
        prefix = 0.0 if rng.random() < 0.6 else 2.0 ** (int(rng.integers(0, 900)) / 64)
        path = int(rng.choice([EXPAND, EXPAND, EXPAND_CHUNKED, ABSORB]))
        chunks.append((path, new, new + prefix, bool(rng.random() < 0.7)))
    return MixedShape(tuple(decode), tuple(sorted(chunks)), 0.0, 0.0, 0.0)


def test_split_by_groups_is_split_by_requests_bit_for_bit() -> None:
    rng = np.random.default_rng(5)
    cut = whole = 0
    for _ in range(3000):
        shape = random_shape(rng)
        got, want = halves(shape), halves_by_segments(shape)
        assert repr(got) == repr(want)  # values and their types (an int 1 is not a float 1.0)
        assert got == want
        pieces = [c for side in got for c in side.chunks if c not in shape.chunks]
        cut, whole = cut + bool(pieces), whole + (not pieces)
    assert cut > 300 and whole > 300  # both kinds of split were compared


def test_a_shape_without_chunks_is_split_by_requests() -> None:
    shape = MixedShape(((ABSORB, 1.0, 7, 1200.0), (ABSORB, 2.0, 3, 800.0)), (), 0.0, 0.0, 0.0)
    first, second = halves(shape)
    assert first == halves_by_segments(shape)[0] and second == halves_by_segments(shape)[1]
    assert sum(g[2] for g in first.decode) == 5 and sum(g[2] for g in second.decode) == 5
