"""How two-batch overlap splits one rank's step into its two micro-batches, as SGLang does.

SGLang's `two_batch_overlap.py` (`compute_split_seq_index`, `compute_split_token_index`):

- a decode (or target-verify) batch is halved by requests;
- an extend batch (prompt chunks, with any decode requests that ride along as one-token
  extends) is split between whole requests where the two token sums come closest
  (`_split_array_by_balanced_sum`), so a request's chunk stays in one micro-batch. Only when
  that leaves the first micro-batch outside [t, 1 - t] of the tokens (t: its
  `--tbo-token-distribution-threshold`, 0.48 by default) does it split at the token midpoint,
  cutting the one chunk that straddles it in two ("two-chunk split": the first part ends where
  the second starts, and only the second part samples).

Four 4,096-token prompts on a rank thus run as two micro-batches of two whole prompts each,
equal in attention work; cutting every prompt in half instead would give the second
micro-batch three times the first's attention (its queries see the first half's keys too).
"""

from __future__ import annotations

import numpy as np

from sim.cost.layer_ops import RankSegments

# SGLang's `--tbo-token-distribution-threshold` default (server_args.py): the token share the
# smaller side of a whole-request split must keep before a chunk is cut at the midpoint
TBO_TOKEN_DISTRIBUTION_THRESHOLD = 0.48


def split_in_two(s: RankSegments) -> tuple[RankSegments, RankSegments]:
    """The two micro-batches of a rank's segments (module docstring). Decode requests are
    halved by context order (the first takes the odd one out); a batch with prompt chunks
    lists its chunks first, then its decode requests (SGLang's mixed batch appends the running
    requests to the new ones), and is split by the balanced-sum rule."""
    dec = s.is_decode.nonzero()[0]
    dec = dec[np.argsort(s.k[dec], kind="stable")]
    sampled = np.ones(len(s.q), dtype=bool) if s.samples is None else s.samples
    if len(dec) == len(s.q):
        return _take(s, dec[0::2], sampled), _take(s, dec[1::2], sampled)
    order = np.concatenate([(~s.is_decode).nonzero()[0], dec])
    lens = s.q[order]
    cum = np.cumsum(lens)
    total = float(cum[-1])
    cut = balanced_index(cum, total)
    left = float(cum[cut - 1]) if cut > 0 else 0.0
    t = TBO_TOKEN_DISTRIBUTION_THRESHOLD
    if t * total <= left <= (1.0 - t) * total:
        return _take(s, order[:cut], sampled), _take(s, order[cut:], sampled)
    # two-chunk split at the token midpoint: the straddling segment is cut in two
    half = float(np.floor(total / 2))
    j = int(np.searchsorted(cum, half, side="right"))  # first segment ending past the midpoint
    before = float(cum[j - 1]) if j > 0 else 0.0
    first_q = half - before
    i = int(order[j])
    if first_q <= 0 or s.is_decode[i]:  # the midpoint falls between segments (or in a token)
        return _take(s, order[:j], sampled), _take(s, order[j:], sampled)
    second_q = float(s.q[i]) - first_q
    first = _concat(_take(s, order[:j], sampled), _one(s, i, first_q, float(s.k[i]) - second_q))
    second = _concat(
        _one(s, i, second_q, float(s.k[i]), bool(sampled[i])), _take(s, order[j + 1 :], sampled)
    )
    return first, second


def balanced_index(cum: np.ndarray, total: float) -> int:
    """SGLang's `_split_array_by_balanced_sum`: the split index in 1..n-1 whose left sum comes
    closest to half (the later one of a tie), 0 for a single segment."""
    if len(cum) < 2:
        return 0
    diffs = np.abs(2.0 * cum[:-1] - total)
    return len(diffs) - int(np.argmin(diffs[::-1]))


def _take(s: RankSegments, idx: np.ndarray, sampled: np.ndarray) -> RankSegments:
    return RankSegments(
        q=s.q[idx], k=s.k[idx], is_decode=s.is_decode[idx], path=s.path[idx], samples=sampled[idx]
    )


def _one(s: RankSegments, i: int, q: float, k: float, samples: bool = False) -> RankSegments:
    """Part of segment i: `q` of its tokens, its cache holding `k` after them."""
    return RankSegments(
        q=np.array([q], dtype=s.q.dtype),
        k=np.array([k], dtype=s.k.dtype),
        is_decode=s.is_decode[i : i + 1].copy(),
        path=s.path[i : i + 1].copy(),
        samples=np.array([samples]),
    )


def _concat(a: RankSegments, b: RankSegments) -> RankSegments:
    assert a.samples is not None and b.samples is not None
    return RankSegments(
        q=np.concatenate([a.q, b.q]),
        k=np.concatenate([a.k, b.k]),
        is_decode=np.concatenate([a.is_decode, b.is_decode]),
        path=np.concatenate([a.path, b.path]),
        samples=np.concatenate([a.samples, b.samples]),
    )
