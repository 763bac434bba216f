"""The step breakdown's row of kernel launches (`LAUNCH_ROW`): each op's time counts the calls
of its roofline-priced kernels (`OpTime.launches`), the step log moves their launch figure out
of the op's row into one of its own, and the run's results say where the figure comes from."""

from __future__ import annotations

import numpy as np
import pytest
from test_serving import decode_batch

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.batch import StepCost
from sim.cost.overheads import SMALL_KERNEL_SOURCE, SMALL_KERNEL_US
from sim.cost.rate import LAUNCH_ROW, OpTime, Rate, combine, scale
from sim.cost.serving import ServingCostModel
from sim.engine.log import StepLog, StepRecord
from sim.specs import Deployment
from sim.specs.profile import Profile

V3, H200 = load_model("deepseek-v3"), load_gpu("h200")
TP8 = Deployment(name="tp8", attn_tp=8, moe_tp=8)


def roofline_rate(fixed_s: float, source: str = "roofline") -> Rate:
    return Rate(compute_s_per_s=1.0, memory_s_per_s=1.0, fixed_s=fixed_s, source=source)


def test_a_roofline_call_counts_one_launch_and_a_table_call_none() -> None:
    assert roofline_rate(5e-6).time(1e-6, 2e-6).launches == 1.0
    assert roofline_rate(0.0).time(1e-6, 2e-6).launches == 0.0  # a launch-free roofline
    assert roofline_rate(5e-6, "published").time(1e-6, 2e-6).launches == 0.0  # inside its time
    a = OpTime(seconds=1.0, source="roofline", launches=2.0)
    b = OpTime(seconds=3.0, source="published")
    assert combine(a, b).launches == 2.0 and scale(a, 61).launches == 122.0


def with_launch(profile: Profile, us: float) -> Profile:
    r = profile.roofline
    launch = r.launch_overhead_us.model_copy(update={"value": us})
    roofline = r.model_copy(update={"launch_overhead_us": launch})
    return profile.model_copy(update={"roofline": roofline})


@pytest.mark.parametrize("requests", [1, 16, 64])
def test_the_launches_counted_are_what_the_launch_figure_adds_to_the_step(requests: int) -> None:
    """Priced twice with launch figures 2 us apart, a TP8 decode step on a roofline profile
    (no table, no overlap) grows by 2 us a kernel: its ops' launch counts are those kernels."""
    profile = load_profile("h200-roofline")
    batch = decode_batch(1, requests, kv=2048)  # TP8: one attention rank
    costs = [
        ServingCostModel(V3, H200, TP8, with_launch(profile, us)).step_cost(batch)
        for us in (5.0, 7.0)
    ]
    kernels = (costs[1].duration_s - costs[0].duration_s) / 2e-6
    counted = sum(op.launches for op in costs[0].ops.values())
    assert counted == pytest.approx(kernels, rel=1e-6)
    assert counted > 1000  # ~1,600 kernels a TP8 decode step: 61 layers of a dozen and more
    assert [c.launch_s for c in costs] == pytest.approx([5e-6, 7e-6])


def test_the_log_shows_the_launches_in_their_own_row_and_the_rows_add_up() -> None:
    cost = ServingCostModel(V3, H200, TP8.model_copy(update={"engine": "sglang"}),
                            load_profile("h200-sglang"))  # fmt: skip
    step = cost.step_cost(decode_batch(1, 32, kv=2048))
    assert step.launch_s == SMALL_KERNEL_US["sglang"] * 1e-6  # SGLang's kernel in a graph
    log = StepLog(1)
    log.append(StepRecord(0, 0.0, step, np.array([32]), 32, 0, 32, 32, 0))
    row = dict(zip(log.op_names, log.op_seconds[0].tolist(), strict=True))
    launches = sum(op.launches for op in step.ops.values())
    assert 0 < launches < 1000  # the profile's tables price most kernels, launches inside
    assert row[LAUNCH_ROW] == pytest.approx(launches * step.launch_s)
    for name, op in step.ops.items():  # each op less its own launches; a table's op as it was
        assert row[name] == pytest.approx(op.seconds - op.launches * step.launch_s, abs=1e-15)
        assert row[name] >= 0.0
    assert sum(row.values()) == pytest.approx(sum(op.seconds for op in step.ops.values()))
    assert log.op_source(LAUNCH_ROW) == "published"


def test_a_step_without_launches_has_no_row() -> None:
    step = StepCost(duration_s=1.0, rank_own_s=np.ones(2), launch_s=5e-6,
                    ops={"attn": OpTime(seconds=1.0, source="measured")})  # fmt: skip
    log = StepLog(2)
    log.append(StepRecord(0, 0.0, step, np.array([1, 1]), 2, 0, 2, 2, 0))
    assert log.op_names == ["attn"]


def test_a_run_reports_the_launch_row_and_its_source() -> None:
    from sim.api import run_scenario
    from sim.specs.scenario import Scenario

    scenario = Scenario.model_validate({
        "name": "launch-row", "model": "deepseek-v3", "gpu": "h200", "profile": "h200-roofline",
        "deployments": [
            {"name": "sglang", "attn_tp": 8, "moe_tp": 8, "engine": "sglang"},
            {"name": "plain", "attn_tp": 8, "moe_tp": 8},
        ],
        "workload": {"kind": "closed", "concurrency_per_rank": 4,
                     "input": {"kind": "fixed", "tokens": 256},
                     "output": {"kind": "fixed", "tokens": 16}},
        "slo": {"ttft_s": 10.0, "tpot_s": 1.0},
        "run": {"duration_s": 2.0, "warmup_s": 0.2, "seed": 1},
    })  # fmt: skip
    sglang, plain = run_scenario(scenario).deployments
    assert sglang.launch_source == f"1.93 us a kernel: {SMALL_KERNEL_SOURCE['sglang']}"
    assert plain.launch_source is not None and plain.launch_source.startswith("5.22 us a kernel")
    for d in (sglang, plain):
        assert d.step_breakdown_s[LAUNCH_ROW] > 0 and d.step_sources[LAUNCH_ROW] == "published"
    # SGLang's graph-replayed kernel costs less than the profile's figure: a smaller row
    assert sglang.step_breakdown_s[LAUNCH_ROW] < plain.step_breakdown_s[LAUNCH_ROW]
