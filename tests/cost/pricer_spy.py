"""Shared by the cost tests: record every op a cost model prices, with the work it was priced at."""

from __future__ import annotations

from sim.cost.ops import Op, elem_bytes
from sim.cost.rate import OpTime
from sim.cost.serving import ServingCostModel

Call = tuple[str, dict[str, object], float, float, str, OpTime]


def spied(cm: ServingCostModel) -> list[Call]:
    """From now on, each op `cm` prices: name, attributes, FLOPs, bytes, dtype and its time."""
    calls: list[Call] = []
    price = cm.pricer.price

    def spy(op: Op, dtype: str = "bf16", *, runs: Op | None = None) -> OpTime:
        t = price(op, dtype, runs=runs)
        flops, nbytes = (runs or op).work(cm.pricer.mla, elem_bytes(dtype))
        calls.append((op.op, op.attributes(), flops, nbytes, dtype, t))
        return t

    cm.pricer.price = spy  # type: ignore[method-assign]
    return calls
