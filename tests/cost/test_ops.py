"""The op types: one per table op, holding exactly its attributes, each counting its own work."""

from __future__ import annotations

import dataclasses

import pytest

from sim.cost.attention_ops import OP_TYPES, op_at
from sim.cost.ops import AllReduce, Gemm, MoeDown, MoeUp
from sim.specs.profile import OP_ATTRIBUTES


def test_every_table_op_has_one_type_with_exactly_its_attributes() -> None:
    assert set(OP_TYPES) == set(OP_ATTRIBUTES)
    for op, t in OP_TYPES.items():
        assert t.op == op
        compared = {f.name for f in dataclasses.fields(t) if f.compare}
        assert compared == set(OP_ATTRIBUTES[op]), op


def test_an_op_counts_its_own_work() -> None:
    # [64, 7168] x [7168, 1536] in FP8: 2mkn FLOPs; FP8 operands, BF16 output
    gemm = Gemm(m=64.0, k=7168.0, n=1536.0)
    assert gemm.work(None, 1.0) == (2 * 64 * 7168 * 1536, 64 * 7168 + 7168 * 1536 + 2 * 64 * 1536)
    # ring all-reduce over 8 GPUs of a 1 MB tensor moves 2 x 7/8 of it
    assert AllReduce(bytes=1e6, gpus=8.0, link="nvlink").work(None, 2.0) == (0.0, 1.75e6)
    up = MoeUp(tokens_per_expert=4.0, num_local_experts=2.0, hidden=10.0, intermediate=3.0,
               layout="x")  # fmt: skip
    down = MoeDown(**dataclasses.asdict(up))
    assert up.work(None, 1.0)[0] == down.work(None, 1.0)[0] * 2  # gate+up is twice as wide


def test_an_op_is_read_from_its_attributes() -> None:
    attrs = {"m": 64, "k": 7168, "n": 1536}
    assert op_at("gemm", attrs) == Gemm(m=64, k=7168, n=1536)
    assert op_at("gemm", attrs).attributes() == {"m": 64.0, "k": 7168.0, "n": 1536.0}
    with pytest.raises(ValueError, match="'k' must be a number"):
        op_at("gemm", {**attrs, "k": True})
    with pytest.raises(ValueError, match=r"needs attributes \['n'\]"):
        op_at("gemm", {"m": 1, "k": 1})
    with pytest.raises(ValueError, match="MLA shape"):
        op_at("mla_prefill", {"seq_len": 8, "prefix_len": 0, "heads": 16}).work(None, 2.0)
