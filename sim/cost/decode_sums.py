"""A mixed step's decode requests summed per rank, in two passes over the batch.

A step with prompt chunks holds thousands of decode segments (an EP144 unit: ~18,000) and a few
dozen chunks. Every per-rank figure the cost model needs of the decode side (the requests and
their context sum on each rank, for the decode-only ranks' shapes, the chunk ranks' decode
groups, the step's tokens per rank and the exchange's decode load) follows from two counts over
the decode segments, where those share one verify width and one MLA path (nearly every step:
the engine verifies every request at the same width, and every MLA policy decides a decode
segment's path one by one). The engine lists a step's decode segments before its chunks
(`sim.engine.scheduler`), so they are a prefix of the batch and need no selecting. Counted once
here, the same figures no longer cost a masked copy and a count of the whole batch in each of
their users; the sums are of whole tokens, so they are the same floats whatever the order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from numpy.typing import NDArray

from sim.cost.batch import BatchShape, all_equal

if TYPE_CHECKING:  # it uses these sums
    from sim.cost.mixed_shape import DecodePath


class DecodeSums(NamedTuple):
    """The decode side of a step whose first `n` segments are its decode requests, all `width`
    new tokens on MLA path `path`: their number and context sum on each rank."""

    n: int
    width: int
    path: int
    requests: NDArray[np.int64]
    kv_sum: NDArray[np.float64]
    tokens: NDArray[np.float64]  # decode (and verify) tokens on each rank: requests x width


def decode_sums(
    batch: BatchShape, n_r: NDArray[np.int64], decode_path: DecodePath
) -> DecodeSums | None:
    """The decode side of a `batch` with both decode segments and chunks, its decode segments
    first, of one width and one path (`n_r`: its segments per rank); None for any other batch
    (the caller selects its segments as before)."""
    dec = batch.is_decode
    n = int(np.count_nonzero(dec))
    if n == 0 or n == dec.shape[0] or np.count_nonzero(dec[:n]) < n:
        return None
    q, k = batch.new_tokens[:n], batch.kv_tokens[:n]
    if batch.decode_width is None and not all_equal(q):  # a known width needs no reading
        return None
    path = decode_path(q, k, dec[:n])
    if path is None:
        return None
    rank, ranks = batch.rank, batch.num_ranks
    requests = n_r - np.bincount(rank[n:], minlength=ranks)  # the few chunks counted, not the rest
    # whole-token contexts: their float64 sums are exact, whatever the order
    kv_sum = np.bincount(rank[:n], weights=k, minlength=ranks).astype(np.float64, copy=False)
    width = int(q[0])
    tokens = requests.astype(np.float64) * float(width)
    return DecodeSums(n, width, path, requests, kv_sum, tokens)
