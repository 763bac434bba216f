"""A bounded memo of priced shapes, and the rounding its keys use.

Every value stored is a pure function of its key: callers round their inputs to the key's
buckets before they price them (`round_to_bucket`), so a hit returns exactly what pricing would.
Evicting an entry then only costs the time to price it again: the least recently used entry
goes first, one at a time, never the whole cache.
"""

from __future__ import annotations

import bisect
import math
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from functools import lru_cache, partial
from typing import Any, Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

BUCKETS_PER_OCTAVE = 16  # 2^(1/16) steps: a value is rounded by at most 2.2%
FEW_VALUES = 8  # `buckets` of at most this many values: scalar arithmetic, value by value


# Buckets and centres are read off constant tables of one octave (Python's `**`, computed once)
# and scaled by exact powers of two, never through numpy's vectorised log2 or power: those take
# a different code path on CPUs with AVX-512 and may differ there in the last bit, which near a
# bucket edge would move a value to the next bucket and a run's results with it.


@lru_cache(maxsize=8)
def _octave(per_octave: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(the mantissas in [0.5, 1) at which the bucket steps up, 2^((j + 1/2) / p) for
    j = -p..-1; the centres of one octave, 2^(r / p) for r = 0..p-1)."""
    p = per_octave
    edges = np.array([2.0 ** ((j + 0.5) / p) for j in range(-p, 0)])
    return edges, np.array([2.0 ** (r / p) for r in range(p)])


def buckets(x: NDArray[np.float64], per_octave: int = BUCKETS_PER_OCTAVE) -> NDArray[np.int64]:
    """2^(1/16) buckets of positive values (2^(1/per_octave) if given): round(p log2 x), from
    x = m 2^e (m in [0.5, 1)) as p e - p plus the edges at or below m. A few values go one at a
    time (`bucket`: the same buckets), where numpy's per-call cost would be most of the work."""
    if x.ndim == 1 and x.shape[0] <= FEW_VALUES:
        return np.array([bucket(v, per_octave) for v in x.tolist()], dtype=np.int64)
    edges, _ = _octave(per_octave)
    m, e = np.frexp(x)
    out: NDArray[np.int64] = per_octave * (e.astype(np.int64) - 1) + np.searchsorted(
        edges, m, side="right"
    )
    return out


@lru_cache(maxsize=8)
def _scalar_octave(per_octave: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """`_octave` as Python floats, for one value at a time (`bucket` and `centre` run dozens
    of times a step)."""
    edges, mids = _octave(per_octave)
    return tuple(float(v) for v in edges), tuple(float(v) for v in mids)


_EDGES, _CENTRES = _scalar_octave(BUCKETS_PER_OCTAVE)


def bucket(x: float, per_octave: int = BUCKETS_PER_OCTAVE) -> int:
    """`buckets` of one positive value in scalar arithmetic (the same frexp and edges: the
    same bucket), for a one-rank step, where numpy's per-call cost is most of the work."""
    edges = _EDGES if per_octave == BUCKETS_PER_OCTAVE else _scalar_octave(per_octave)[0]
    m, e = math.frexp(x)
    return per_octave * (e - 1) + bisect.bisect_right(edges, m)


def centre(b: int, per_octave: int = BUCKETS_PER_OCTAVE) -> float:
    """The value bucket `b` stands for (exact for powers of two)."""
    mids = _CENTRES if per_octave == BUCKETS_PER_OCTAVE else _scalar_octave(per_octave)[1]
    q, r = divmod(b, per_octave)
    return math.ldexp(mids[r], q)


def centres(b: NDArray[np.int64], per_octave: int = BUCKETS_PER_OCTAVE) -> NDArray[np.float64]:
    """The values buckets stand for (`centre`, vectorised; of `buckets(x, per_octave)`)."""
    out: NDArray[np.float64] = np.ldexp(_octave(per_octave)[1][b % per_octave], b // per_octave)
    return out


@lru_cache(maxsize=1 << 14)
def round_to_bucket(x: float) -> float:
    """`x` at its bucket's centre (0 and below stay 0); remembered, since a run rounds the same
    few thousand token counts again and again (a step's loads round a dozen)."""
    return centre(round(math.log2(x) * BUCKETS_PER_OCTAVE)) if x > 0 else 0.0


class BoundedCache(Generic[K, V]):
    """Least-recently-used memo holding at most `max_entries` values."""

    def __init__(self, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries}")
        self.max_entries = max_entries
        self._entries: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        """Whether `key` is stored (its place in the eviction order unchanged)."""
        return key in self._entries

    def put(self, key: K, value: V) -> None:
        """Store `value` for `key` (priced elsewhere, for a key not stored yet)."""
        entries = self._entries
        entries[key] = value
        if len(entries) > self.max_entries:
            entries.popitem(last=False)

    def find(self, key: K) -> V | None:
        """The value stored for `key` (now the most recently used), or None: for a memo whose
        values are never None, a hit without building the function a miss would call."""
        value = self._entries.get(key, _MISSING)
        if value is _MISSING:
            return None
        self._entries.move_to_end(key)
        return value  # type: ignore[no-any-return]

    def find_many(self, keys: Iterable[K]) -> list[V | None]:
        """`find` of each key in turn, in one call (a rank's parts are looked up together)."""
        entries, move = self._entries, self._entries.move_to_end
        out: list[V | None] = []
        for key in keys:
            value = entries.get(key, _MISSING)
            if value is _MISSING:
                out.append(None)
            else:
                move(key)
                out.append(value)
        return out

    def get(self, key: K, compute: Callable[[], V]) -> V:
        """The value stored for `key`, computing and storing it on a miss."""
        entries = self._entries
        try:
            value = entries[key]
        except KeyError:
            value = compute()
            self.put(key, value)
            return value
        entries.move_to_end(key)
        return value

    def get_many(self, keys: Iterable[K], compute: Callable[[K], V]) -> list[V]:
        """`get` of each key in turn, `compute(key)` on a miss: one call for a step's many
        lookups, most of them hits."""
        entries, out = self._entries, []
        for key in keys:
            value = entries.get(key, _MISSING)
            if value is _MISSING:
                value = self.get(key, partial(compute, key))
            else:
                entries.move_to_end(key)
            out.append(value)
        return out  # type: ignore[return-value]


_MISSING: Any = object()
