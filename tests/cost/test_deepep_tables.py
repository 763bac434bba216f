"""DeepEP's low-latency and normal kernels as SGLang's collector timed them
(aiconfigurator-core), read by the SGLang production-kernel profiles; an exchange is read only
from a table of its own mode and link (`sim.cost.calibrated.EP_KERNEL_KEYS`), and a table timed
over a range of tokens keeps its own fixed part (no DeepEP README floor on top:
`sim.cost.comm_ops._with_latency_floor`)."""

from __future__ import annotations

import numpy as np
import pytest
from test_serving import decode_batch

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.batch import BatchShape
from sim.cost.ops import EpDispatch
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment

V3, H200 = load_model("deepseek-v3"), load_gpu("h200")
SGLANG = load_profile("h200-sglang")


def dp8(engine: str = "sglang") -> Deployment:
    # balanced routing, no EPLB replicas: DeepEP's benchmark layout (top-8 of 256 over 8 GPUs)
    return Deployment(
        name="dp8", attn_tp=1, moe_ep=8, engine=engine, expert_zipf_exponent=0.0,  # type: ignore[arg-type]
        eplb_redundant_experts=0,
    )  # fmt: skip


def low_key() -> dict[str, object]:
    return {"hidden": 7168, "topk": 8, "mode": "low_latency"}


def table_us(op: str, tokens: float, mode: str = "low_latency") -> float:
    (table,) = [
        t
        for t in SGLANG.tables
        if t.op == op and t.key["mode"] == mode and t.key["link"] == "nvlink"
    ]
    assert table.key["link"] == "nvlink" and table.key["ep"] == 8
    by = {p.at["tokens_per_rank"]: p.latency_us_p50 for p in table.points}
    return by[tokens]


@pytest.mark.parametrize("tokens", [8, 32, 128])
def test_a_one_node_decode_exchange_is_the_collectors_kernel_time(tokens: int) -> None:
    """DP8 + EP8 on one H200 node, `tokens` decode requests per GPU: each MoE layer's dispatch
    and combine take what the collector timed at that many tokens per GPU."""
    cm = ServingCostModel(V3, H200, dp8(), SGLANG)
    step = cm.step_cost(decode_batch(8, tokens, 2048))
    for op in ("ep_dispatch", "ep_combine"):
        t = step.ops[op]
        assert t.source == "published"
        per_layer_us = t.seconds / V3.moe_layers * 1e6
        assert per_layer_us == pytest.approx(table_us(op, tokens), rel=1e-6)


def test_the_tables_are_the_collectors_rows() -> None:
    """Re-read from the installed package: the one-node rows of DeepSeek-V3's shape."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("aiconfigurator_core")
    from kernels_calib import aic_source as src

    one_node = [t for t in SGLANG.tables if t.op == "ep_dispatch" and t.key["link"] == "nvlink"]
    (version,) = {t.source.split("/comm/sglang/")[1].split("/")[0] for t in one_node}
    for t in one_node:
        assert t.source in SGLANG.provenance["ep_dispatch"].split("; ")
    folder = src.installed().folder("h200_sxm", "comm", "sglang", version)

    def rows(name: str) -> object:
        t = pd.read_parquet(folder / f"{name}.parquet")
        t = t[(t.hidden_size == 7168) & (t.num_topk == 8) & (t.num_experts == 256)]
        return t[t.node_num == 1]

    ll = rows("wideep_deepep_ll_perf")
    assert len(ll) >= 8
    for r in ll.itertuples():
        assert table_us("ep_dispatch", float(r.num_token)) == pytest.approx(r.dispatch_avg_t_us)
        assert table_us("ep_combine", float(r.num_token)) == pytest.approx(r.combine_avg_t_us)
    at_24 = rows("wideep_deepep_normal_perf")
    at_24 = at_24[at_24.dispatch_sms == 24]
    assert len(at_24) >= 8
    for r in at_24.itertuples():
        tokens, dispatch = float(r.num_token), r.dispatch_notify_us + r.dispatch_transmit_us
        assert table_us("ep_dispatch", tokens, "normal") == pytest.approx(dispatch)
        combine = r.combine_notify_us + r.combine_transmit_us
        assert table_us("ep_combine", tokens, "normal") == pytest.approx(combine)


def test_a_prefill_exchange_reads_the_normal_kernels_table() -> None:
    """A prefill step runs DeepEP's normal kernels: read from their own table (24 SMs), never
    the low-latency one, whatever the nearest key; an exchange over RDMA from the RDMA
    tables."""
    cm = ServingCostModel(V3, H200, dp8(), SGLANG)
    prompt = BatchShape(
        num_ranks=8,
        rank=np.arange(8, dtype=np.int64),
        new_tokens=np.full(8, 2048),
        kv_tokens=np.full(8, 2048),
        is_decode=np.zeros(8, dtype=bool),
    )
    step = cm.step_cost(prompt)
    for op in ("ep_dispatch", "ep_combine"):
        assert step.ops[op].source == "published"
        per_layer_us = step.ops[op].seconds / V3.moe_layers * 1e6
        assert per_layer_us == pytest.approx(table_us(op, 2048.0, "normal"), rel=1e-6)
    probe = cm.pricer.table_axis  # the table an exchange is read from
    normal = EpDispatch(2048.0, 8.0, "normal", "nvlink", 7168.0, 8.0)
    low = EpDispatch(32.0, 8.0, "low_latency", "nvlink", 7168.0, 8.0)
    assert 2048.0 in probe(normal, "tokens_per_rank") and 131072.0 in probe(
        normal, "tokens_per_rank"
    )
    assert probe(low, "tokens_per_rank")[-1] == 1024.0  # the low-latency table's own range
    # several nodes: the RDMA tables (an older campaign of the same collector), never NVLink's
    over_rdma = EpDispatch(32.0, 16.0, "low_latency", "rdma", 7168.0, 8.0)
    rdma = next(
        t for t in SGLANG.tables if t.op == "ep_dispatch" and t.key == {**low_key(), "link": "rdma"}
    )
    assert probe(over_rdma, "tokens_per_rank") == tuple(rdma.axes["tokens_per_rank"])
    assert probe(over_rdma, "ep") == (16.0, 32.0, 64.0)
