"""Probes: declarative cost-model facts for `expect:` lines, typed and rejected when malformed."""

from __future__ import annotations

from typing import Any

import pytest

from sim.checks.probes import ProbeError, compute_probes

V3 = {"model": "deepseek-v3"}


def _one(**entry: Any) -> Any:
    return compute_probes({"p": entry})["p"]


@pytest.mark.parametrize(
    ("q", "k", "expand", "absorb"),
    [  # DESIGN.md §1 reference table, DeepSeek-V3 per layer, GFLOPs
        (1, 8192, 275.5, 2.3),
        (8192, 8192, 3024.0, 9621.9),
        (64, 32768 + 64, 1273.6, 586.8),
        (512, 32768 + 512, 2501.8, 4726.7),
    ],
)
def test_mla_flops_reproduce_reference_table(q: int, k: int, expand: float, absorb: float) -> None:
    got = _one(kind="mla_flops", new_tokens=q, kv_tokens=k, **V3)
    assert got["expand_gflops"] == pytest.approx(expand, abs=0.06)
    assert got["absorb_gflops"] == pytest.approx(absorb, abs=0.06)


def test_crossover_tends_to_171() -> None:
    assert _one(kind="mla_crossover", kv_tokens=10**7, **V3) == pytest.approx(170.67, abs=0.01)
    assert _one(kind="mla_crossover", kv_tokens=32768, **V3) < 170.67


@pytest.mark.parametrize(
    ("policy", "q", "k", "path"),
    [
        ("sglang", 1, 8192, "absorb"),
        ("sglang", 8192, 8192, "expand"),
        ("sglang", 64, 4096 + 64, "absorb"),  # prefix below 8192: MLA
        ("sglang", 64, 32768 + 64, "expand"),  # prefix >= 8192: MHA one shot
        ("sglang", 4096, 200_000, "expand_chunked"),  # past 131072 cached tokens
        ("vllm", 1, 8192, "absorb"),
        ("vllm", 64, 32768 + 64, "expand_chunked"),
        ("flops_optimal", 64, 32768 + 64, "absorb"),
        ("flops_optimal", 512, 1024 + 512, "expand"),
    ],
)
def test_mla_path(policy: str, q: int, k: int, path: str) -> None:
    got = _one(kind="mla_path", policy=policy, new_tokens=q, kv_tokens=k, **V3)
    assert got[path] is True
    assert sum(got.values()) == 1


def test_decode_intensity_and_gpu() -> None:
    assert _one(kind="decode_intensity", **V3) == pytest.approx(241.8, abs=0.1)
    assert _one(kind="decode_intensity", s_query=2, **V3) == pytest.approx(483.6, abs=0.1)
    gpu = _one(kind="gpu", gpu="h200")
    assert gpu["ridge_flop_per_byte"] == pytest.approx(206, abs=1)


def test_step_cost_slowest_rank_sets_the_step() -> None:
    base = {"kind": "step_cost", "gpu": "h200", "deployment": {"attn_tp": 1}, **V3}
    even = _one(**base, requests_per_rank=[16], kv_tokens=[4096])
    skew = _one(**base, requests_per_rank=[16], kv_tokens=[4096] * 7 + [65536])
    assert even["rank_imbalance"] == pytest.approx(1.0)
    assert skew["rank_imbalance"] > 2.0
    assert skew["duration_s"] > even["duration_s"]
    assert skew["ops"]["moe_routed"] == pytest.approx(even["ops"]["moe_routed"])


@pytest.mark.parametrize(
    ("entry", "fragments"),
    [
        ({"kind": "nope"}, ["unknown kind 'nope'", "mla_path", "step_cost"]),
        ("a string", ["unknown kind 'str'"]),
        ({"kind": "mla_crossover", "model": "deepseek-v3"}, ["kv_tokens", "Field required"]),
        (
            {"kind": "mla_crossover", "model": "deepseek-v3", "kv_tokens": 1, "extra": 1},
            ["extra", "Extra inputs are not permitted"],
        ),
        ({"kind": "mla_crossover", "model": "qwen3-235b-a22b", "kv_tokens": 8}, ["not MLA"]),
        ({"kind": "gpu", "gpu": "h999"}, ["unknown gpu 'h999'", "h200"]),
        (
            {"kind": "mla_path", "policy": "x", "new_tokens": 1, "kv_tokens": 1, **V3},
            ["unknown MLA dispatch policy 'x'", "sglang"],
        ),
        (
            {
                "kind": "step_cost",
                "gpu": "h200",
                "deployment": {"attn_tp": 1},
                "requests_per_rank": [1, 2],
                "kv_tokens": [8],
                **V3,
            },
            ["requests_per_rank has 2 values for 8 attention ranks"],
        ),
    ],
)
def test_bad_probes_say_what_is_wrong(entry: Any, fragments: list[str]) -> None:
    with pytest.raises(ProbeError) as err:
        compute_probes({"bad": entry})
    assert err.value.probe == "bad"
    for fragment in fragments:
        assert fragment in str(err.value)
