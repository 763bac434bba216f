"""Multi-token prediction: how many draft tokens each decode request gets accepted per step.

A verify step checks `d` draft tokens per request. Draft i is accepted with probability p_i given
that drafts 1..i-1 were, so the accepted count is the length of the leading run of successes and
the tokens a step yields are accepted + 1 (the verified token itself). The mean is
1 + sum_{i=1..d} prod_{j<=i} p_j.
"""

from __future__ import annotations

import math
import sys

import numpy as np
from numpy.typing import NDArray


def expected_accept_len(probs: tuple[float, ...]) -> float:
    """Closed form of the mean tokens per verify step."""
    return 1.0 + float(np.cumprod(np.asarray(probs, dtype=np.float64)).sum()) if probs else 1.0


class DrawStream:
    """A PCG64 generator read as the stream of 32-bit draws its float32 uniforms are made of.

    `rng.random(n, dtype=np.float32)` turns each of the generator's next n 32-bit draws u into
    (u >> 8) * 2^-24, and PCG64 deals those draws as the low then the high half of its 64-bit
    outputs. Reading the outputs in large blocks (`random_raw`) skips the per-value float work
    and call overhead, and `take(n)` returns the very draws n uniforms would have used, in order,
    however the calls are split. The generator itself runs ahead: every draw from it must go
    through the stream (one stream per generator; units of both PD pools share it).
    """

    def __init__(self, rng: np.random.Generator, block: int = 1 << 16) -> None:
        if not self.supports(rng):
            raise ValueError("DrawStream needs a PCG64 generator on a little-endian machine")
        self._bg = rng.bit_generator
        self.block = block
        st = self._bg.state
        held = [st["uinteger"]] if st["has_uint32"] else []  # a half already drawn, unread
        self._buf = np.asarray(held, dtype=np.uint32)
        self._pos = 0

    @staticmethod
    def supports(rng: np.random.Generator) -> bool:
        return isinstance(rng.bit_generator, np.random.PCG64) and sys.byteorder == "little"

    def take(self, m: int) -> NDArray[np.uint32]:
        """The next `m` draws (read-only)."""
        end = self._pos + m
        if end <= self._buf.shape[0]:
            out = self._buf[self._pos : end]
            self._pos = end
            return out
        # a new block: the draws left of the old one, then the new block's first; only those m
        # are copied (a whole block, ~256 KB, was, once every few decode steps of a large unit)
        left = self._buf[self._pos :]
        raw = self._bg.random_raw(max(self.block, m) // 2 + 1).view(np.uint32)
        raw.flags.writeable = False
        self._buf, self._pos = raw, m - left.shape[0]
        out = np.concatenate([left, raw[: self._pos]])
        out.flags.writeable = False
        return out


class DraftSampler:
    """Samples accepted drafts for many requests at once from the run's generator.

    A draft passes when a float32 uniform falls below its probability p. On a `DrawStream` the
    same test runs on the 32-bit draw u itself: (u >> 8) * 2^-24 < p exactly when
    u < ceil(p * 2^24) * 2^8 (p is a float32, so p * 2^24 is exact). Given a `Generator`, the
    sampler reads it through its own stream when it can, else draws float32 uniforms.
    """

    def __init__(self, probs: tuple[float, ...], rng: np.random.Generator | DrawStream) -> None:
        self.probs = np.asarray(probs, dtype=np.float32)
        self.rng: np.random.Generator | None = None
        self.draws: DrawStream | None = None
        if isinstance(rng, DrawStream):
            self.draws = rng
        elif DrawStream.supports(rng):
            self.draws = DrawStream(rng)
        else:
            self.rng = rng
        # ceil(p * 2^24) * 2^8 as exact integers; 2^32 passes every draw
        self._thr = np.asarray(
            [math.ceil(float(p) * 2**24) << 8 for p in self.probs], dtype=np.uint64
        )

    @property
    def draft_tokens(self) -> int:
        return int(self.probs.shape[0])

    def _passes(self, n: int) -> NDArray[np.bool_]:
        """n x d matrix: whether each request's uniform for each draft is below its p."""
        d = self.draft_tokens
        if self.draws is None:
            assert self.rng is not None
            return self.rng.random((n, d), dtype=np.float32) < self.probs  # type: ignore[no-any-return]
        return self.draws.take(n * d).reshape(n, d) < self._thr  # type: ignore[no-any-return]

    def accepted(self, n: int) -> NDArray[np.integer]:
        """Accepted draft count (0..d) for each of `n` requests in one step (small ints)."""
        d = self.draft_tokens
        if d == 0:
            return np.zeros(n, dtype=np.int8)
        if d == 1:  # common case, one uniform per request
            if self.draws is None:
                assert self.rng is not None
                return (self.rng.random(n, dtype=np.float32) < self.probs[0]).view(np.int8)
            u, thr = self.draws.take(n), int(self._thr[0])
            ok = np.less(u, thr) if thr < 2**32 else np.ones(n, dtype=bool)
            return ok.view(np.int8)
        ok = self._passes(n)
        # length of the leading run of True: first False's index, or d when all pass
        first_fail = np.where(ok.all(axis=1), d, np.argmin(ok, axis=1))
        return first_fail.astype(np.int8)
