"""EP dispatch/combine: set by the GPU that moves the most bytes (busiest sender or receiver)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost import comm_ops, unit_work
from sim.cost.batch import BatchShape
from sim.cost.calibrated import CalibratedCost
from sim.cost.comm import ep_copies
from sim.cost.comm_load import CommLoad
from sim.cost.memo import round_to_bucket
from sim.cost.ops import AllReduce, EpDispatch
from sim.cost.routed import receive_skew
from sim.cost.serving import ServingCostModel
from sim.specs import Deployment
from tests.cost.calibrated_query import link_seconds, table_work

V3, H800 = load_model("deepseek-v3"), load_gpu("h800")
H800_PUB = load_profile("h800-published")


def unit(counts: list[int], kv: list[int], s_q: int = 1) -> BatchShape:
    """Decode step: counts[r] requests on rank r, each with kv[r] cached tokens."""
    rank = np.repeat(np.arange(len(counts)), counts)
    return BatchShape(
        num_ranks=len(counts),
        rank=rank,
        new_tokens=np.full(rank.size, s_q),
        kv_tokens=np.repeat(np.array(kv), counts),
        is_decode=np.ones(rank.size, dtype=bool),
    )


def ep32(**kw: object) -> Deployment:
    """EP32 with even routing unless `kw` says otherwise (DeepEP's benchmarks route evenly)."""
    kw = {"expert_zipf_exponent": 0.0, **kw}
    return Deployment(name="ep32", nodes=4, attn_tp=1, **kw)  # type: ignore[arg-type]


def comm(step: object) -> tuple[float, float]:
    ops = step.ops  # type: ignore[attr-defined]
    return ops["ep_dispatch"].seconds, ops["ep_combine"].seconds


def test_skewed_routing_grows_the_exchange_with_the_busiest_receiver() -> None:
    batch = unit([128] * 32, [2048] * 32)
    even = ServingCostModel(V3, H800, ep32()).step_cost(batch)
    skewed_d = ep32(expert_zipf_exponent=1.2)
    skewed = ServingCostModel(V3, H800, skewed_d).step_cost(batch)
    factor = receive_skew(V3, skewed_d, 32 * 128)
    assert factor > 4  # one GPU holds the hottest expert: it receives several times the mean
    # the datasheet link roofline is linear in bytes: the exchange scales by exactly that factor
    for s, e in zip(comm(skewed), comm(even), strict=True):
        assert s == pytest.approx(factor * e, rel=1e-9)
    # EPLB replicas bring the busiest receiver back near the mean
    eplb = ServingCostModel(V3, H800, ep32(expert_zipf_exponent=1.2, eplb_redundant_experts=32))
    assert comm(eplb.step_cost(batch))[0] < 1.2 * comm(even)[0]


def test_the_layouts_own_imbalance_sizes_the_receiver() -> None:
    """256 experts on 72 GPUs without EPLB: the busiest GPU holds 4 experts against a mean of
    256 / 72 = 3.56, so under even routing it receives 4 / 3.56 = 1.125x a GPU of DeepEP's
    benchmark layout (equal experts per GPU). 32 EPLB replicas (288 = 4 x 72 slots) halve 32
    experts, but 8 GPUs still hold 4 whole ones: the same 1.125x. EP32 divides evenly: 1.0x."""
    ep72 = Deployment(name="ep72", nodes=9, attn_tp=1, expert_zipf_exponent=0)
    tokens = 72 * 256
    assert receive_skew(V3, ep72, tokens) == pytest.approx(1.125, rel=0.01)
    eplb = ep72.model_copy(update={"eplb_redundant_experts": 32})
    assert receive_skew(V3, eplb, tokens) == pytest.approx(1.125, rel=0.01)
    assert receive_skew(V3, ep32(expert_zipf_exponent=0), 32 * 128) == pytest.approx(1.0)
    # the exchange is sized by that receiver, not by the mean sender's 256 tokens
    load = CommLoad(rank_tokens=256, sender_tokens=256, unit_tokens=tokens, decode_only=True)
    per_gpu = comm_ops.ep_tokens_per_gpu(V3, ep72, load)
    assert per_gpu == pytest.approx(256 * receive_skew(V3, ep72, tokens), rel=1e-12)


def test_even_routing_keeps_deepeps_published_point() -> None:
    """DeepEP's table (128 tokens per rank, uniform random routing, EP32 over RDMA) comes back
    exactly: even routing adds no receiver imbalance beyond the benchmark's own."""
    cm = ServingCostModel(V3, H800, ep32(), H800_PUB)
    step = cm.step_cost(unit([128] * 32, [2048] * 32))
    per_layer = step.ops["ep_dispatch"].seconds / V3.moe_layers
    attrs = {"tokens_per_rank": 128, "ep": 32, "mode": "low_latency", "link": "rdma"}
    attrs |= {"hidden": V3.hidden_size, "topk": 8}
    link = H800.nic_gb_s * 1e9
    table_bytes = table_work("ep_dispatch", attrs)[1]

    def estimate(bytes_: float) -> float:
        cost = cm.pricer.estimator
        assert isinstance(cost, CalibratedCost)
        t = link_seconds(cost, "ep_dispatch", key=attrs, point={}, bytes_=bytes_,
                         link_bytes_per_s=link)  # fmt: skip
        return float(t.seconds)

    assert estimate(table_bytes) == pytest.approx(155e-6, rel=1e-9)  # the published point
    # the simulator counts a GPU's copies exactly as the table does (`comm.ep_copies`)
    assert per_layer == pytest.approx(155e-6, rel=1e-9)
    assert step.ops["ep_dispatch"].source == "published"


def test_a_collectives_calls_and_copies_move_its_bytes_not_its_table_key() -> None:
    """The bytes a step's collective moves are its op's own work; `calls` and a deployment's
    `copies` change that work, never the shape its table is read at (its key and memo key)."""
    dispatch = EpDispatch(128, 32, "low_latency", "rdma", V3.hidden_size, 8)
    own = replace(dispatch, copies=3.5)
    assert own == dispatch and own.attributes() == dispatch.attributes()
    per_value = 1 + 4 / 128  # an FP8 value and its share of an fp32 scale per 128
    assert own.work(None, 1.0)[1] == 128 * 3.5 * V3.hidden_size * per_value
    table_copies = dispatch.benchmark_copies()  # DeepEP's benchmark layout, as its table
    assert dispatch.work(None, 1.0)[1] == 128 * table_copies * V3.hidden_size * per_value
    reduce = AllReduce(bytes=1e6, gpus=8, link="nvlink")
    twice = replace(reduce, calls=2)
    assert twice == reduce and twice.attributes() == reduce.attributes()
    assert twice.work(None, 1.0)[1] == 2 * reduce.work(None, 1.0)[1] == 2 * 2 * 7 / 8 * 1e6


def test_the_rank_with_most_tokens_sets_the_exchange() -> None:
    """One rank at 128 requests (short contexts), 31 at 8 requests (long contexts, slowest
    attention): the exchange is priced at the 128-token rank, as in a unit of 128 everywhere."""
    cm = ServingCostModel(V3, H800, ep32())
    imbalanced = cm.step_cost(unit([128] + [8] * 31, [100] + [20000] * 31))
    assert int(np.argmax(imbalanced.rank_own_s)) != 0  # attention's slowest is another
    full = cm.step_cost(unit([128] * 32, [2048] * 32))
    for a, b in zip(comm(imbalanced), comm(full), strict=True):
        assert a == pytest.approx(b, rel=1e-9)


def test_each_overlap_half_is_sized_by_its_busiest_sender(monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[CommLoad] = []

    def spy(*args: object) -> object:
        loads.append(args[4])  # type: ignore[arg-type]  # (pricer, model, deployment, gpu, load, memo)
        return comm_ops.unit_comm_ops(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(unit_work, "unit_comm_ops", spy)
    cm = ServingCostModel(V3, H800, ep32(two_batch_overlap=True))
    cm.step_cost(unit([128] + [8] * 31, [100] + [20000] * 31))
    full, half = loads
    assert full.sender_tokens == 128 and half.sender_tokens == 64
    # loads are priced at their 2^(1/16) bucket's centre (`CommLoad.rounded`)
    assert half.unit_tokens == round_to_bucket((128 + 31 * 8) / 2) and half.rank_tokens == 4


def test_mtp_draft_passes_pay_their_exchange() -> None:
    """Each draft pass runs one MoE layer over the decode requests: the draft extend over the
    verify width (accepted + 1, padded to drafts + 1 = 3 tokens each), then one pass of one
    token; its dispatch and combine are one layer's at 3 tokens, plus one at a third of them
    (on the datasheet link bandwidth, linear in bytes)."""
    d = ep32(mtp_draft_tokens=2, mtp_acceptance=(0.8,))
    step = ServingCostModel(V3, H800, d).step_cost(unit([64] * 32, [4096] * 32, s_q=3))
    one_layer = sum(comm(step)) / V3.moe_layers
    one_token = ServingCostModel(V3, H800, ep32()).step_cost(unit([64] * 32, [4096] * 32))
    one_token_layer = sum(comm(one_token)) / V3.moe_layers
    draft = step.ops["mtp_draft_comm"].seconds
    assert draft == pytest.approx(one_layer + one_token_layer, rel=1e-9)
    # linear in bytes, to the 2^(1/16) rounding of each pass's load (`CommLoad.rounded`)
    assert draft == pytest.approx(4 * one_layer / 3, rel=0.03)
    tp = Deployment(name="tp", attn_tp=8, moe_tp=8, mtp_draft_tokens=1, mtp_acceptance=(0.8,))
    tp_step = ServingCostModel(V3, load_gpu("h200"), tp).step_cost(unit([64], [4096], s_q=2))
    per_layer = tp_step.ops["tp_allreduce"].seconds / V3.num_layers
    # the draft extend over 2 tokens per request: one layer's all-reduces at the verify width
    assert tp_step.ops["mtp_draft_comm"].seconds == pytest.approx(per_layer, rel=1e-9)


def test_low_latency_copies_split_into_nvlink_and_rdma() -> None:
    """Low-latency kernels send one copy per expert on another GPU; across nodes the RDMA copies
    are the bottleneck and the NVLink ones add their time at NVLink's speed."""
    assert ep_copies(8, 8, 8, "low_latency") == pytest.approx(7.0)
    assert ep_copies(8, 1, 1, "low_latency") == 0.0
    # EP32 on 4 nodes: 8 x 24/32 copies leave the node, 8 x 7/32 go to peers in it
    both = ep_copies(8, 32, 8, "low_latency", nvlink_speedup=4.0)
    assert both == pytest.approx(6.0 + 1.75 / 4.0)
    # EP256: nearly every copy leaves the node
    assert ep_copies(8, 256, 8, "low_latency", nvlink_speedup=1e9) == pytest.approx(7.75)


def test_normal_copies_deduplicate_per_node_and_per_gpu() -> None:
    """Normal kernels send a token once per distinct destination: per other GPU inside a node,
    per remote node across nodes (with the NVLink forwarding stage as the alternative
    bottleneck)."""
    intra = ep_copies(8, 8, 8, "normal")
    assert intra == pytest.approx(8 * (1 - (7 / 8) ** 8) * 7 / 8)
    # 4 nodes, NVLink far faster than RDMA: the RDMA stage sets the time
    hit = 4 * (1 - (3 / 4) ** 8)
    assert ep_copies(8, 32, 8, "normal", nvlink_speedup=1e9) == pytest.approx(hit * 3 / 4)
    # group-limited routing: 8 nodes, experts within 4 of them
    limited = ep_copies(8, 64, 8, "normal", max_nodes=4, nvlink_speedup=1e9)
    assert limited == pytest.approx(hit * 7 / 8)
    # 2 nodes at H800's NVLink/RDMA ratio: forwarding inside the node is the slower stage
    two = ep_copies(8, 16, 8, "normal", nvlink_speedup=3.2)
    assert two > ep_copies(8, 16, 8, "normal", nvlink_speedup=1e9)


def test_every_deepep_point_sits_below_its_link() -> None:
    """Counted the way the simulator counts them, all 20 of DeepEP's published points reach
    0.5-1 of their link: none is dropped when the link efficiency is derived."""
    effs = []
    for table in H800_PUB.tables:
        if table.op not in ("ep_dispatch", "ep_combine"):
            continue
        assert table.link_bytes_per_s is not None
        for p in table.points:
            attrs = {**table.key, **p.at}
            nbytes = table_work(table.op, attrs)[1]
            effs.append(nbytes / table.link_bytes_per_s / (p.latency_us_p50 * 1e-6))
    assert len(effs) == 20
    assert all(0.5 < e < 1.0 for e in effs), sorted(effs)
    source = H800_PUB.roofline.comm_link_efficiency.source
    assert "20 comm points" in source and "left out" not in source


def test_low_latency_exchange_keeps_a_floor_below_deepeps_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DeepEP's published low-latency figures are at 128 tokens per rank; away from it the
    exchange is a fixed floor (half of the one-node dispatch + combine at one token, 28.5 us)
    plus a part in proportion to tokens: at 128 tokens the published point, at 64 more than
    half of it, at 256 less than twice, never below the floor. A roofline-priced exchange (no
    DeepEP table) keeps its own fixed part only."""
    d = ep32()

    def exchange(cm: ServingCostModel, tokens: float) -> dict[str, float]:
        load = CommLoad(
            rank_tokens=tokens, sender_tokens=tokens, unit_tokens=32 * tokens, decode_only=True
        )
        ops = comm_ops.ep_exchange(cm.pricer, V3, d, H800, load)
        return {op: t.seconds for op, t in ops.items()}

    published = ServingCostModel(V3, H800, d, H800_PUB)
    floor = comm_ops.DEEPEP_LL_FLOOR_S
    assert floor == pytest.approx(28.5e-6 / 2)
    sizes = (1, 64, 128, 256)
    at = {n: exchange(published, n) for n in sizes}
    assert at[128]["ep_dispatch"] == pytest.approx(155e-6, rel=1e-9)  # DeepEP's EP32 point
    plain = ServingCostModel(V3, H800, d)
    with_floor = {n: exchange(plain, n) for n in (64, 128)}
    monkeypatch.setattr(comm_ops, "DEEPEP_LL_FLOOR_S", 0.0)
    pure = {n: exchange(published, n) for n in sizes}  # all in proportion, the table's launch
    for op, ref in at[128].items():
        assert ref == pure[128][op]
        assert at[64][op] == pytest.approx(pure[64][op] + floor / 2, rel=1e-9)
        assert at[256][op] == pytest.approx(pure[256][op] - floor, rel=1e-9)
        assert at[64][op] > at[128][op] / 2 and at[256][op] < 2 * at[128][op]
        assert at[1][op] >= floor
    assert with_floor == {n: exchange(plain, n) for n in (64, 128)}
