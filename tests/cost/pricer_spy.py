"""Shared by the cost tests: record every op a cost model prices, with the work it was priced at."""

from __future__ import annotations

from collections.abc import Callable

from sim.cost.ops import Op, elem_bytes
from sim.cost.rate import OpTime
from sim.cost.serving import ServingCostModel

Call = tuple[str, dict[str, object], float, float, str, OpTime]


class _PassThrough:
    """A pieces memo that keeps nothing: every piece is priced where the step runs it."""

    def get(self, key: tuple[object, ...], price: Callable[[], OpTime]) -> OpTime:
        return price()


def spied(cm: ServingCostModel) -> list[Call]:
    """From now on, each op `cm` prices: name, attributes, FLOPs, bytes, dtype and its time.
    Its pieces memos keep nothing from then on, so that a piece the step runs twice (the MTP
    module's shared expert at the target pass's width, say) is seen twice; they return what
    pricing gives (`tests/cost/test_rank_parts.py`)."""
    calls: list[Call] = []
    cm._pieces = _PassThrough()  # type: ignore[assignment]
    if cm._mixed is not None:
        cm._mixed._pieces = _PassThrough()  # type: ignore[assignment]
    price = cm.pricer.price

    def spy(op: Op, dtype: str = "bf16", *, runs: Op | None = None) -> OpTime:
        t = price(op, dtype, runs=runs)
        flops, nbytes = (runs or op).work(cm.pricer.mla, elem_bytes(dtype))
        calls.append((op.op, op.attributes(), flops, nbytes, dtype, t))
        return t

    cm.pricer.price = spy  # type: ignore[method-assign]
    return calls
