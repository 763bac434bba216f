"""`bench/compiled_pass.py`: its loop (run here as plain Python, as numba would compile it) and
its numpy pass do the same arithmetic, and the numpy pass does what the engine's step does."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from tests.builders import bench_script


@pytest.fixture(scope="module")
def cp() -> ModuleType:
    return bench_script("compiled_pass")


def _small(cp: ModuleType, seed: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    n = 300
    rank = np.sort(rng.integers(0, cp.RANKS, n)).astype(np.int64)
    kv = rng.integers(1, 400, n).astype(np.int64)
    end = kv + rng.integers(1, 4, n)  # many rows done in one pass
    pages = (kv + cp.PAGE - 1) // cp.PAGE
    draws = rng.integers(0, 2**32, n, dtype=np.uint32)
    return {"rank": rank, "kv": kv, "end": end, "pages": pages}, draws


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_loop_and_the_numpy_pass_agree(cp: ModuleType, seed: int) -> None:
    a, draws = _small(cp, seed)
    kv1, pg1, kv2, pg2 = a["kv"].copy(), a["pages"].copy(), a["kv"].copy(), a["pages"].copy()
    want = cp.numpy_pass(kv1, a["end"], pg1, a["rank"], draws)
    got = cp._loop(kv2, a["end"], pg2, a["rank"], draws)
    assert want[0] == got[0]
    for x, y in zip(want[1:], got[1:], strict=True):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(kv1, kv2)
    np.testing.assert_array_equal(pg1, pg2)


def test_the_numpy_pass_counts_tokens_done_rows_and_pages_by_hand(cp: ModuleType) -> None:
    rank = np.array([0, 0, 1], dtype=np.int64)
    kv = np.array([63, 10, 5], dtype=np.int64)
    end = np.array([100, 11, 6], dtype=np.int64)
    pages = np.array([1, 1, 1], dtype=np.int64)
    # row 0's draft accepted (2 tokens: 65, a second page), rows 1 and 2 rejected (1 token each:
    # 11 and 6, both reaching their end)
    draws = np.array([0, 2**32 - 1, 2**32 - 1], dtype=np.uint32)
    emitted, done, added, kv_sum, count = cp.numpy_pass(kv, end, pages, rank, draws)
    assert emitted == 4
    np.testing.assert_array_equal(done, [1, 2])
    np.testing.assert_array_equal(kv, [65, 11, 6])
    np.testing.assert_array_equal(pages, [2, 1, 1])
    assert added[0] == 1 and added[1:].sum() == 0
    assert kv_sum[0] == 76 and kv_sum[1] == 6
    assert count[0] == 2 and count[1] == 1
