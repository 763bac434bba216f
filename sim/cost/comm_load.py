"""The tokens that size a step's communication (`CommLoad`): a step's own, its MTP passes',
and its two-batch-overlap micro-batches'. `sim.cost.comm_ops` prices them on links.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sim.cost.batch import BatchShape
from sim.cost.decode_sums import DecodeSums
from sim.cost.memo import round_to_bucket

# a 1-D array's max and sum, as ndarray.max / ndarray.sum compute them (the same reductions)
# without their Python-level wrappers: a step sizes three loads
_MAX, _SUM = np.maximum.reduce, np.add.reduce


class CommLoad(NamedTuple):
    """Tokens that size one forward pass's communication (a named tuple: a step's memo keys
    hold three, hashed and compared in C).

    `rank_tokens`: the critical rank's tokens (the TP all-reduce of a pass priced as a unit:
    the MTP module's; a step's own is each rank's, `tp_allreduce`);
    `sender_tokens`: the most tokens any attention rank holds (DeepEP and the DP-attention gather
    wait for it); `unit_tokens`: all ranks' tokens together (what the experts receive).
    `decode_sender_tokens`, `decode_unit_tokens`: the same for decode and verify tokens alone,
    which set the floor of a mixed step's EP exchange (0 in decode-only loads).
    """

    rank_tokens: float
    sender_tokens: float
    unit_tokens: float
    decode_only: bool
    decode_sender_tokens: float = 0.0
    decode_unit_tokens: float = 0.0

    def rounded(self) -> CommLoad:
        """The same load with every token count at its 2^(1/16) bucket's centre: what the
        unit-wide work of a step is priced for, so that its memo (keyed by the rounded load)
        returns only what pricing would."""
        r = round_to_bucket
        return CommLoad(
            rank_tokens=r(self.rank_tokens),
            sender_tokens=r(self.sender_tokens),
            unit_tokens=r(self.unit_tokens),
            decode_only=self.decode_only,
            decode_sender_tokens=r(self.decode_sender_tokens),
            decode_unit_tokens=r(self.decode_unit_tokens),
        )

    def scaled(self, share: float) -> CommLoad:
        """The same load with every token count times `share`."""
        return CommLoad(
            rank_tokens=self.rank_tokens * share,
            sender_tokens=self.sender_tokens * share,
            unit_tokens=self.unit_tokens * share,
            decode_only=self.decode_only,
            decode_sender_tokens=self.decode_sender_tokens * share,
            decode_unit_tokens=self.decode_unit_tokens * share,
        )

    def decode_part(self) -> CommLoad:
        """The decode and verify tokens of a mixed load, run as a decode-only pass."""
        return CommLoad(
            rank_tokens=0.0,
            sender_tokens=self.decode_sender_tokens,
            unit_tokens=self.decode_unit_tokens,
            decode_only=True,
        )


def comm_loads(
    batch: BatchShape,
    tokens_r: np.ndarray,
    crit: int,
    *,
    mtp: bool,
    requests_r: np.ndarray | None = None,
    sums: DecodeSums | None = None,
) -> tuple[CommLoad, CommLoad | None, CommLoad | None]:
    """What sizes a step's unit-wide work (`tokens_r`: tokens per rank, `crit`: the critical
    rank); with MTP, also its draft passes' (one token per decode request) and the MTP
    module's pass over the step's prefill chunks (None when there is no such pass).
    `requests_r`: the requests per rank of a decode-only step, where the caller has counted
    them (its decode requests, so they need not be counted again); `sums`: a mixed step's
    decode side, where counted (`sim.cost.decode_sums`)."""
    dec = batch.is_decode
    decode_only = requests_r is not None or np.count_nonzero(dec) == dec.shape[0]
    draft = extend = None
    if decode_only:
        load = _load(tokens_r, crit, decode_only=True)
    else:
        dec_tokens = _tokens_per_rank(batch, dec) if sums is None else sums.tokens
        load = _load(tokens_r, crit, decode_only=False, decode_tokens_r=dec_tokens)
        if mtp:
            extend = _load(tokens_r - dec_tokens, crit, decode_only=False)
    if mtp and requests_r is not None:
        draft = _load(requests_r.astype(np.float64), crit, decode_only=True)
    elif mtp and sums is not None:
        draft = _load(sums.requests.astype(np.float64), crit, decode_only=True)
    elif mtp and np.count_nonzero(dec):
        dec_r = np.bincount(batch.rank[dec], minlength=batch.num_ranks).astype(np.float64)
        draft = _load(dec_r, crit, decode_only=True)  # low-latency kernels
    return load, draft, extend


def micro_batch_loads(
    load: CommLoad, batch: BatchShape, tokens_r: np.ndarray, crit: int, whole: np.ndarray
) -> tuple[CommLoad, CommLoad]:
    """The loads of two-batch overlap's two micro-batches (`load`: the step's; `tokens_r`: its
    tokens per rank): each rank splits its tokens in two halves, except the `whole` ranks
    (True: it cannot split), whose tokens all go to the second."""
    if not whole.any():
        half = load.scaled(0.5)
        return half, half
    dec = batch.is_decode
    mixed = not load.decode_only
    dec_r = _tokens_per_rank(batch, dec) if mixed else np.zeros(batch.num_ranks)
    loads = []
    for share in (np.where(whole, 0.0, 0.5), np.where(whole, 1.0, 0.5)):
        loads.append(
            _load(tokens_r * share, crit, decode_only=not mixed, decode_tokens_r=dec_r * share)
        )
    return loads[0], loads[1]


def _tokens_per_rank(batch: BatchShape, sel: np.ndarray) -> np.ndarray:
    weights = batch.new_tokens[sel].astype(np.float64)
    return np.bincount(batch.rank[sel], weights=weights, minlength=batch.num_ranks)


def _load(
    tokens_r: np.ndarray,
    crit: int,
    *,
    decode_only: bool,
    decode_tokens_r: np.ndarray | None = None,
) -> CommLoad:
    """The load of `tokens_r` tokens per rank (`crit`: the critical rank), and of its decode
    tokens per rank where given (a mixed step's)."""
    if decode_tokens_r is None:
        sender = unit = 0.0
    else:
        sender, unit = float(_MAX(decode_tokens_r)), float(_SUM(decode_tokens_r))
    return CommLoad(
        rank_tokens=float(tokens_r[crit]),
        sender_tokens=float(_MAX(tokens_r)),
        unit_tokens=float(_SUM(tokens_r)),
        decode_only=decode_only,
        decode_sender_tokens=sender,
        decode_unit_tokens=unit,
    )
