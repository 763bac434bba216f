"""The step log keeps each step's op times and sources in the right columns, whatever the order
in which steps of different op sets and sources come (it looks each set's columns up once)."""

from __future__ import annotations

import numpy as np

from sim.cost.batch import StepCost
from sim.cost.rate import OpTime
from sim.engine.log import StepLog, StepRecord


def T(seconds: float, source: str) -> OpTime:
    return OpTime(seconds=seconds, source=source)


def record(ops: dict[str, OpTime]) -> StepRecord:
    cost = StepCost(duration_s=sum(t.seconds for t in ops.values()), rank_own_s=np.ones(2), ops=ops)
    return StepRecord(0, 0.0, cost, np.array([1, 1]), 2, 0, 2, 2, 0)


def test_alternating_op_sets_land_in_their_own_columns() -> None:
    decode = {"attn": T(1.0, "published"), "moe": T(2.0, "roofline")}
    mixed = {"moe": T(3.0, "published"), "prefill": T(4.0, "roofline"),
             "attn": T(5.0, "published")}  # fmt: skip
    late = {"attn": T(6.0, "roofline"), "head": T(7.0, "measured")}  # a new column
    steps = [decode, mixed, decode, mixed, mixed, late, decode, late, mixed]
    log = StepLog(2, capacity=4)  # grows twice while the op sets recur
    for ops in steps:
        log.append(record(ops))
    secs = log.op_seconds
    col = {name: log.op_names.index(name) for name in ("attn", "moe", "prefill", "head")}
    for i, ops in enumerate(steps):
        want = {name: ops[name].seconds if name in ops else 0.0 for name in col}
        assert {name: float(secs[i, j]) for name, j in col.items()} == want
    by_source = {n: log.op_sources(n) for n in col}
    assert by_source["attn"] == {"published": 1.0 + 5 + 1 + 5 + 5 + 1 + 5, "roofline": 12.0}
    assert by_source["moe"] == {"roofline": 6.0, "published": 12.0}
    assert by_source["prefill"] == {"roofline": 16.0}
    assert by_source["head"] == {"measured": 14.0}


def test_a_repeated_ops_dict_keeps_its_row_unless_the_launch_figure_changes() -> None:
    """Steps priced whole from a memo hand the log the same ops dict: its row is reused, but
    not across a different per-kernel launch figure (the launch row splits otherwise)."""
    ops = {"attn": OpTime(seconds=1.0, source="roofline", launches=10.0)}
    log = StepLog(2, capacity=4)
    for launch_s in (0.0, 0.0, 0.01, 0.01, 0.0):
        cost = StepCost(duration_s=1.0, rank_own_s=np.ones(2), ops=ops, launch_s=launch_s)
        log.append(StepRecord(0, 0.0, cost, np.array([1, 1]), 2, 0, 2, 2, 0))
    secs = log.op_seconds
    attn = log.op_names.index("attn")
    launch = log.op_names.index("kernel_launch")
    assert secs[:, attn].tolist() == [1.0, 1.0, 0.9, 0.9, 1.0]
    assert secs[:, launch].tolist() == [0.0, 0.0, 0.1, 0.1, 0.0]


def test_rows_of_many_recurring_ops_dicts_stay_in_their_columns() -> None:
    """More ops dicts recur than the log keeps rows of: the oldest rows go, and are built
    again when their dicts come back."""
    names = ["attn", "moe", "head", "prefill"]
    dicts = [
        {names[k % 4]: T(1.0 + k, "roofline"), names[(k + 1) % 4]: T(0.5 * k, f"src{k % 3}")}
        for k in range(12)
    ]
    steps = [dicts[k % 12] for k in range(30)] + [dicts[3], dicts[1], dicts[3], dicts[11]]
    log = StepLog(2, capacity=4)
    for ops in steps:
        log.append(record(ops))
    secs = log.op_seconds
    for i, ops in enumerate(steps):
        got = {n: float(secs[i, log.op_names.index(n)]) for n in names}
        assert got == {n: ops[n].seconds if n in ops else 0.0 for n in names}
    want_src: dict[str, float] = {}
    got_src: dict[str, float] = {}
    for ops in steps:
        for op in ops.values():
            want_src[op.source] = want_src.get(op.source, 0.0) + op.seconds
    for n in names:
        for src, v in log.op_sources(n).items():
            got_src[src] = got_src.get(src, 0.0) + v
    assert {k: v for k, v in got_src.items() if v} == {k: v for k, v in want_src.items() if v}
