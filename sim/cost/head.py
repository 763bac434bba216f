"""The output head (lm_head) split over the whole unit, as SGLang places it by default.

With `lm_head: unit`, every GPU of the unit holds vocab / GPUs rows of the head. A step gathers
the sampled hidden states of every attention rank to every GPU, each GPU computes its slice of
the logits for all of them, and an all-gather over the unit assembles the full vocabulary
before each rank samples its own rows. The GEMM reads 1/GPUs of the weights for all the unit's
rows. SGLang lays the gathered hidden states back to back (its logits metadata always uses the
sum-len layout, `sim.cost.comm_ops.dp_gather`), so they arrive by an all-reduce; the logits by
an all-gather; both in BF16, over NVLink inside a node, RDMA across.
With `lm_head: rank` the head is each rank's own work (`ServingCostModel._head`).
"""

from __future__ import annotations

import numpy as np

from sim.cost import comm
from sim.cost.batch import BatchShape
from sim.cost.layer_ops import RankContext, gemm
from sim.cost.ops import AllGather, AllReduce
from sim.cost.pricing import Pricer
from sim.cost.rate import ZERO, OpTime, combine
from sim.specs.deployment import Deployment
from sim.specs.gpu import GpuSpec


def sampled_rows(batch: BatchShape) -> float:
    """Logits rows of a step across the unit: every verify token of a decode request, and one
    per prefill chunk that completes its prompt."""
    dec = batch.is_decode
    rows = float(batch.new_tokens[dec].sum())
    done = ~dec if batch.samples_token is None else ~dec & batch.samples_token
    return rows + float(np.count_nonzero(done))


def unit_head(
    pr: Pricer, c: RankContext, d: Deployment, g: GpuSpec, rows: float
) -> dict[str, OpTime]:
    """`lm_head` (this GPU's vocab slice for all `rows`) and `logits_gather` (the hidden states
    in, the logits out) of one head pass split over the unit."""
    if rows <= 0:
        return {"lm_head": ZERO, "logits_gather": ZERO}
    m, gpus = c.model, d.gpus
    link = comm.group_link(g, gpus, d.gpus_per_node)
    hidden = rows * m.hidden_size * comm.BF16
    logits = rows * m.vocab_size * comm.BF16
    gather = combine(
        pr.link(AllReduce(bytes=hidden, gpus=gpus, link=link.name), link.bytes_per_s),
        pr.link(AllGather(bytes=logits, gpus=gpus, link=link.name), link.bytes_per_s),
    )
    head = gemm(pr, c, rows, m.hidden_size, m.vocab_size // gpus, "bf16")
    return {"lm_head": head, "logits_gather": gather}
