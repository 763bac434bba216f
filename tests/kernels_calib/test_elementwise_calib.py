"""The elementwise family: fused add+RMSNorm checked against float64, timed, stored by bytes."""

from __future__ import annotations

import json

import pytest
import torch

from kernels_calib import elementwise
from kernels_calib.context import Ctx
from kernels_calib.plan import make_plan
from kernels_calib.runner import calibrate
from kernels_calib.timing import Timing
from sim.catalog import load_gpu, load_model
from sim.cost import elementwise as ew
from sim.cost.calibrated import CalibratedCost
from sim.cost.pricing import Pricer
from sim.specs.profile import Profile
from tests.cost.calibrated_query import table_work

H200 = load_gpu("h200")


@pytest.fixture(scope="module")
def profile() -> Profile:
    return calibrate(device="cpu", quick=True, ops=["elementwise"], show_progress=False)


def test_cpu_family_writes_a_valid_elementwise_table(profile: Profile) -> None:
    assert [t.op for t in profile.tables] == ["elementwise"]
    table = profile.tables[0]
    assert table.key == {} and table.impl == "torch_add_rms_norm" and table.dtype == "bf16"
    assert table.axes == {"tokens": [1.0, 64.0], "width": [512.0, 2048.0]}  # width = 2 x hidden
    for p in table.points:
        tokens, width = p.at["tokens"], p.at["width"]
        assert p.flops == 0.0
        # x and residual read, both written, BF16: 4 x 2 x tokens x hidden bytes
        assert p.hbm_bytes == 4 * 2 * tokens * (width / 2)
        assert p.hbm_bytes == table_work("elementwise", p.at)[1]
        assert p.latency_us_p10 is not None and p.latency_us_p10 <= p.latency_us_p50
    checks = [n for n in profile.notes if n.startswith("elementwise add+rmsnorm")]
    assert len(checks) == 2 and all(n.endswith(" ok") for n in checks)
    reread = Profile.model_validate(json.loads(profile.model_dump_json()))
    assert reread.tables == profile.tables


def test_cost_model_reproduces_a_measured_point(profile: Profile) -> None:
    pr = Pricer(H200, CalibratedCost(profile, H200))
    table = profile.tables[0]
    for p in table.points:
        hidden = p.at["width"] / 2
        norm = ew.Kernel(
            name="n", tokens=p.at["tokens"], bytes_per_token=ew.add_rmsnorm_bytes(hidden)
        )
        t = ew.price(pr, [norm])
        assert t.source == "measured" and not t.extrapolated
        assert t.seconds * 1e6 == pytest.approx(p.latency_us_p50, rel=1e-9)


def _ctx() -> Ctx:
    model = load_model("deepseek-v3")
    return Ctx(
        plan=make_plan("cpu", True, model.num_heads),
        model=model,
        gen=torch.Generator().manual_seed(0),
        device_name="cpu",
    )


def test_check_refuses_a_norm_that_skips_the_residual() -> None:
    def no_add(x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, elementwise.EPS)

    ctx = _ctx()
    assert not elementwise.check(ctx, elementwise.NormKernel(impl="no_add", run=no_add))
    assert any("output [no_add]" in n and "FAILED" in n for n in ctx.notes)
    assert elementwise.check(ctx, elementwise.candidates(ctx)[-1])


def test_a_kernel_failing_its_check_is_reported_and_not_timed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    good = elementwise.candidates(_ctx())[-1]
    broken = elementwise.NormKernel(
        impl="broken", run=lambda x, r, w: good.run(x, r, w) * torch.nan
    )
    monkeypatch.setattr(elementwise, "candidates", lambda ctx: [broken])
    profile = calibrate(device="cpu", quick=True, ops=["elementwise"], show_progress=False)
    assert not profile.tables
    assert any("[broken]: output holds NaN" in n for n in profile.notes)
    assert "elementwise: no kernel passed the check; not timed" in profile.notes


@pytest.mark.parametrize("quick", [True, False])
def test_cuda_grids_cover_decode_to_long_prefill_and_the_model_widths(quick: bool) -> None:
    plan = make_plan("cuda", quick, 128)
    widths = [2 * h for h in plan.elementwise_hidden]
    assert min(widths) == 512 and max(widths) == 2 * 7168
    assert min(plan.elementwise_tokens) == 1 and max(plan.elementwise_tokens) == 16384
    assert len(plan.elementwise_tokens) * len(plan.elementwise_hidden) <= 40


def test_launch_cost_is_the_slope_of_kernel_chains(
    profile: Profile, monkeypatch: pytest.MonkeyPatch
) -> None:
    launch = profile.roofline.launch_overhead_us  # a real CPU run
    assert launch.source.startswith("measured: (") and "in-place BF16 adds" in launch.source
    assert launch.value >= 0
    lo, hi = elementwise.LAUNCH_CHAIN
    ctx = _ctx()
    chains: list[int] = []

    def fake_time(f: object, inputs: list[tuple[torch.Tensor, torch.Tensor]]) -> Timing:
        x, y = (t.clone() for t in inputs[0])
        n = round(float(((f(x, y) - inputs[0][0]) / inputs[0][1]).float().mean()))  # type: ignore[operator]
        chains.append(n)
        return Timing(0.0, 10.0 + 2.0 * n, 0.0, 5, False)  # 2 us per kernel

    monkeypatch.setattr(ctx, "time_rotating", fake_time)
    elementwise.measure_launch(ctx)
    assert chains == [lo, hi]
    assert ctx.launch is not None and ctx.launch.value == pytest.approx(2.0)


def test_launch_chain_failing_its_check_leaves_the_residual_estimate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(elementwise, "_adds", lambda n: lambda x, y: x)  # skips the adds
    ctx = _ctx()
    elementwise.measure_launch(ctx)
    assert ctx.launch is None
    assert ctx.notes[0].startswith("elementwise launch: 33 adds: relative error")
    assert ctx.notes[0].endswith("FAILED")
    assert ctx.notes[-1] == "elementwise launch: a chain was not timed; launch cost not measured"
