"""The default cost models are kept per process (`sim.run.default_cost_factory`): a run that
reuses one, its memos warm from other workloads, gives exactly what a cold one gives."""

from __future__ import annotations

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.run import COST_MODELS_KEPT, default_cost_factory, forget_cost_models, run_scenario
from sim.specs import Deployment
from tests.builders import poisson, tiny


def results(**changes: object) -> str:
    return run_scenario(tiny(**changes)).model_dump_json()


def test_a_kept_model_prices_as_a_new_one() -> None:
    forget_cost_models()
    a = results()
    b = results(workload=poisson(9.0, 3000, 80))  # same deployments, warm from `a`'s steps
    again = results()
    forget_cost_models()
    cold_b = results(workload=poisson(9.0, 3000, 80))
    assert again == a
    assert b == cold_b
    assert b != a  # the two workloads do differ: the check could fail


def test_models_are_kept_by_specs_and_deployment_and_the_oldest_goes() -> None:
    forget_cost_models()
    v3, h200, p = load_model("deepseek-v3"), load_gpu("h200"), load_profile("h200-roofline")
    d = Deployment(name="tp8", attn_tp=8, moe_tp=8)
    first = default_cost_factory(v3, h200, d, p)
    assert default_cost_factory(v3, h200, Deployment(name="tp8", attn_tp=8, moe_tp=8), p) is first
    assert default_cost_factory(v3, h200, d, None) is not first  # another profile
    assert (
        default_cost_factory(v3, h200, d.model_copy(update={"max_running_requests": 64}), p)
        is not first
    )
    for n in range(COST_MODELS_KEPT):  # as many other deployments: `first` is the oldest
        default_cost_factory(v3, h200, d.model_copy(update={"max_running_requests": 8 + n}), p)
    assert default_cost_factory(v3, h200, d, p) is not first
    forget_cost_models()


def test_each_thread_keeps_its_own_models() -> None:
    import threading

    forget_cost_models()
    v3, h200 = load_model("deepseek-v3"), load_gpu("h200")
    d = Deployment(name="tp8", attn_tp=8, moe_tp=8)
    here = default_cost_factory(v3, h200, d, None)
    there: list[object] = []
    t = threading.Thread(target=lambda: there.append(default_cost_factory(v3, h200, d, None)))
    t.start()
    t.join()
    assert there and there[0] is not here  # memos are never shared between threads
    assert default_cost_factory(v3, h200, d, None) is here
    forget_cost_models()
