"""A step's unit-wide work: the routed experts on the busiest EP GPU, the communication, the
unit-wide dense layers and head, and the MTP module's unit-wide share.

Each is sized by a `CommLoad` rounded to 2^(1/16) buckets (`CommLoad.rounded`) before it is
priced, so that a memo of these ops returns only what pricing the rounded load would.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sim.cost.batch import BatchShape
from sim.cost.comm_load import CommLoad
from sim.cost.comm_ops import draft_comm, layer_comm_ops, unit_comm_ops
from sim.cost.dense import unit_dense_ops
from sim.cost.head import sampled_rows, unit_head
from sim.cost.layer_ops import Memo, RankContext, kept
from sim.cost.memo import round_to_bucket
from sim.cost.pricing import Pricer
from sim.cost.rate import ZERO, OpTime, combine, scale
from sim.cost.routed import routed_gemms
from sim.cost.routed_elementwise import routed_elementwise
from sim.specs.deployment import Deployment
from sim.specs.gpu import GpuSpec
from sim.specs.model import ModelSpec


def draft_passes(drafts: int) -> list[tuple[int, int]]:
    """The MTP module's passes per decode step, as (tokens per request, times): SGLang's draft
    extend after verify runs the module over each request's accepted tokens + 1, padded to
    drafts + 1 for its CUDA graph (`forward_draft_extend_after_decode`), and yields the first
    draft token; the other drafts - 1 tokens take one single-token pass each."""
    passes = [(drafts + 1, 1)]
    if drafts > 1:
        passes.append((1, drafts - 1))
    return passes


# a memo of a step's unit-wide ops by part (the draft passes', the extend's): the dict stored
# for a key, or the computed one stored
OpsMemo = Callable[[tuple[object, ...], Callable[[], dict[str, OpTime]]], dict[str, OpTime]]


def unit_ops(
    pr: Pricer,
    ctx: RankContext,
    d: Deployment,
    gpu: GpuSpec,
    load: CommLoad,
    draft: CommLoad | None,
    extend: CommLoad | None,
    memo: Memo | None = None,
    parts: OpsMemo | None = None,
) -> dict[str, OpTime]:
    """A step's unit-wide ops, every layer. `draft`: the MTP draft passes' load; `extend`: the
    MTP module's over prompt chunks. With a `memo`, each pass's routed experts, their kernels
    and the MTP passes' exchange are kept by the few numbers of the load that set them (a
    mixed step's whole load rarely repeats; its decode or prefill tokens alone often do); with
    `parts`, the draft passes' ops and the extend's by their own loads (a mixed step's draft
    load, its decode requests, recurs while its prompt tokens move the rest)."""
    m, n = ctx.model, load.unit_tokens
    ops = {"moe_routed": scale(_experts(pr, m, d, n, load.decode_only, memo), m.moe_layers)}
    act = _kernels(pr, m, d, n, load.decode_only, load.sender_tokens, memo)
    ops["moe_elementwise"] = scale(act, m.moe_layers)
    part: dict[str, OpTime]
    if draft is not None and draft.unit_tokens > 0:
        part = kept(parts, ("draft", draft), lambda: _draft_ops(pr, m, d, gpu, draft, memo))
        ops.update(part)
    if extend is not None and extend.unit_tokens > 0:  # the MTP module over prompt chunks
        part = kept(parts, ("extend", extend), lambda: _extend_ops(pr, m, d, gpu, extend, memo))
        ops.update(part)
    ops.update(unit_comm_ops(pr, m, d, gpu, load, memo))
    if d.dense_ffn == "unit":
        ops.update(unit_dense_ops(pr, ctx, d, gpu, load))
    return ops


def _draft_ops(
    pr: Pricer, m: ModelSpec, d: Deployment, gpu: GpuSpec, draft: CommLoad, memo: Memo | None
) -> dict[str, OpTime]:
    """The MTP draft passes' unit-wide ops: their routed experts and kernels, and their
    exchange where it takes time."""
    passes = draft_passes(d.mtp_draft_tokens)
    moe = []
    for width, times in passes:
        n_dec = round_to_bucket(draft.unit_tokens * width)
        both = combine(
            _experts(pr, m, d, n_dec, True, memo), _kernels(pr, m, d, n_dec, True, 0.0, memo)
        )
        moe.append(scale(both, times))
    ops = {"mtp_draft_moe": combine(*moe)}

    def exchange(x: CommLoad, times: int) -> OpTime:
        return kept(memo, ("draft comm", x, times), lambda: draft_comm(pr, m, d, gpu, x, times))

    comm = combine(*(exchange(draft.scaled(w).rounded(), times) for w, times in passes))
    if comm.seconds > 0:
        ops["mtp_draft_comm"] = comm
    return ops


def _extend_ops(
    pr: Pricer, m: ModelSpec, d: Deployment, gpu: GpuSpec, extend: CommLoad, memo: Memo | None
) -> dict[str, OpTime]:
    """The MTP module's unit-wide ops over a step's prompt chunks: its routed experts and
    kernels, and its layer's exchange."""
    n_pre = extend.unit_tokens
    act = _kernels(pr, m, d, n_pre, False, extend.sender_tokens, memo)
    return {
        "mtp_prefill_moe": combine(_experts(pr, m, d, n_pre, False, memo), act),
        "mtp_prefill_comm": kept(
            memo,
            ("extend comm", extend),
            lambda: combine(*layer_comm_ops(pr, m, d, gpu, extend, memo).values()),
        ),
    }


def _experts(
    pr: Pricer, m: ModelSpec, d: Deployment, tokens: float, decode_only: bool, memo: Memo | None
) -> OpTime:
    """One MoE layer's routed expert GEMMs for the unit's `tokens` (`routed_gemms`), through
    `memo` by what sets them."""
    key = ("routed", tokens, decode_only)
    return kept(memo, key, lambda: routed_gemms(pr, m, d, tokens, decode_only))


def _kernels(
    pr: Pricer,
    m: ModelSpec,
    d: Deployment,
    tokens: float,
    decode_only: bool,
    sender: float,
    memo: Memo | None,
) -> OpTime:
    """Their memory-bound kernels (`routed_elementwise`), through `memo` by what sets them."""
    key = ("routed kernels", tokens, decode_only, sender)
    return kept(memo, key, lambda: routed_elementwise(pr, m, d, tokens, decode_only, sender))


def micro_batch_ops(
    pr: Pricer,
    m: ModelSpec,
    d: Deployment,
    gpu: GpuSpec,
    load: CommLoad,
    memo: Memo | None = None,
) -> dict[str, OpTime]:
    """One two-batch-overlap micro-batch's routed experts (one layer, with their SiLU, which
    runs between up and down) and its EP exchange (every MoE layer); with a `memo`, the
    experts and their kernels kept as `unit_ops` keeps them."""
    n = load.unit_tokens
    gemms = _experts(pr, m, d, n, load.decode_only, memo)
    act = _kernels(pr, m, d, n, load.decode_only, load.sender_tokens, memo)
    ops = {"moe_routed": combine(gemms, act)}
    ops.update(unit_comm_ops(pr, m, d, gpu, load, memo))
    ops.setdefault("ep_dispatch", ZERO)
    ops.setdefault("ep_combine", ZERO)
    return ops


def unit_head_ops(
    pr: Pricer, ctx: RankContext, d: Deployment, gpu: GpuSpec, batch: BatchShape
) -> dict[str, OpTime]:
    """The head split over the unit (`sim.cost.head`): the step's logits rows in one pass,
    and, with MTP, each draft pass's (a row per decode request) and the MTP module's over
    completed prompts."""
    rows = sampled_rows(batch)
    passes = [(rows, 1)]
    drafts = d.mtp_draft_tokens
    if drafts:
        dec = batch.is_decode
        passes.append((float(np.count_nonzero(dec)), drafts))
        passes.append((rows - float(batch.new_tokens[dec].sum()), 1))  # completed prompts
    out: dict[str, OpTime] = {}
    for rows, times in passes:
        for name, t in unit_head(pr, ctx, d, gpu, rows).items():
            out[name] = combine(out[name], scale(t, times)) if name in out else scale(t, times)
    return out
