"""Predicted vs published for the SGLang EP deployment (docs/validation.md's table).

Runs the scenarios in scenarios/validation/ and prints a Markdown table of each published figure
beside the simulator's prediction and the relative error. The published figures below are for
checking only: nothing in the simulator is fitted to them.

    python tools/validation_table.py [--out docs/validation-table.md]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from sim.catalog import load_gpu, load_model
from sim.catalog.profiles import load_profile
from sim.cost.batch import BatchShape
from sim.cost.serving import ServingCostModel
from sim.io.scenario_io import load_scenario
from sim.run import run_scenario
from sim.specs.profile import Profile

ROOT = Path(__file__).resolve().parent.parent
SOURCE = "LMSYS blog, 2025-05-05: DeepSeek-V3 on 12 x 8 H100, PD + large-scale EP"

# (scenario file, deployment, metric, published value, what was published)
CASES = [
    (
        "sglang-prefill-1K-h100",
        "prefill",
        "input_tok_s_per_node",
        57674,
        "prefill EP32, 1K prompts",
    ),
    (
        "sglang-prefill-2K-h100",
        "prefill",
        "input_tok_s_per_node",
        54543,
        "prefill EP32, 2K prompts",
    ),
    (
        "sglang-prefill-4K-h100",
        "prefill",
        "input_tok_s_per_node",
        50302,
        "prefill EP32, 4K prompts (default EPLB)",
    ),
    (
        "sglang-prefill-4K-h100",
        "prefill_balanced",
        "input_tok_s_per_node",
        59337,
        "prefill EP32, 4K prompts (simulated perfect expert balance)",
    ),
    (
        "sglang-decode-h100",
        "decode_tbo",
        "output_tok_s_per_node",
        22282,
        "decode EP72, 256 req/GPU, KV 2K, TBO",
    ),
    (
        "sglang-decode-h100",
        "decode_no_tbo",
        "output_tok_s_per_node",
        17770,
        "decode EP72, 256 req/GPU, KV 2K, TBO off",
    ),
    (
        "sglang-decode-mtp-h100",
        "decode_mtp",
        "output_tok_s_per_node",
        17373,
        "decode EP72, 128 req/GPU, KV 4K, MTP 60% acceptance",
    ),
]


def table() -> str:
    results = {}
    rows = [
        "| published case | published tok/s/node | predicted tok/s/node | error |",
        "|---|---:|---:|---:|",
    ]
    for stem, dep, metric, published, what in CASES:
        if stem not in results:
            scenario = load_scenario(ROOT / "scenarios" / "validation" / f"{stem}.yaml")
            results[stem] = run_scenario(scenario)
        predicted = float(getattr(results[stem].deployment(dep), metric))
        err = (predicted - published) / published
        rows.append(f"| {what} | {published:,} | {predicted:,.0f} | {err:+.0%} |")
    decode = results["sglang-decode-h100"]
    gain = (
        decode.deployment("decode_tbo").output_tok_s_per_node
        / decode.deployment("decode_no_tbo").output_tok_s_per_node
        - 1
    )
    rows.append("")
    rows.append(f"TBO decode gain: predicted {gain:+.1%}, published +25.5%.")
    small = tbo_small_batch()
    rows.append(
        f"TBO at 32 tokens per GPU (one decode step, EP72): predicted speedup "
        f"{speedup(small):+.0%} (step time {small:+.0%}), published -27% (the post's speedup, "
        f"as its +25.5%: throughput with TBO over without, minus one; step time "
        f"{1 / (1 - 0.27) - 1:+.0%})."
    )
    rows += ["", launch_sensitivity()]
    return "\n".join(rows)


def with_launch_overhead(profile: Profile, us: float) -> Profile:
    """The profile with its roofline launch overhead set to `us` (for the sensitivity only)."""
    r = profile.roofline
    launch = r.launch_overhead_us.model_copy(update={"value": us})
    return profile.model_copy(
        update={"roofline": r.model_copy(update={"launch_overhead_us": launch})}
    )


def speedup(step_change: float) -> float:
    """TBO's speedup as the LMSYS post states it (throughput with TBO over without, minus one)
    from its step-time change."""
    return 1.0 / (1.0 + step_change) - 1.0


def launch_sensitivity(values_us: tuple[float, ...] = (0.0, 1.0, 2.0)) -> str:
    """TBO's speedup at 32 and 256 tokens per GPU as the launch overhead varies.

    Only roofline-priced ops (no kernel table) pay the profile's launch overhead; table ops
    carry their kernels' own. This shows how much of the small-batch TBO gap it can explain.
    """
    scenario = load_scenario(ROOT / "scenarios" / "validation" / "sglang-decode-h100.yaml")
    profile = load_profile(scenario.profile or "")
    now = profile.roofline.launch_overhead_us.value
    rows = [
        "| launch overhead per roofline-priced kernel | TBO speedup, 32 tok/GPU | "
        "TBO speedup, 256 tok/GPU |",
        "|---|---:|---:|",
    ]
    for us in sorted({*values_us, now}, reverse=True):
        p = with_launch_overhead(profile, us)
        label = f"{us:.3g} us" + (" (the profile's)" if us == now else "")
        rows.append(
            f"| {label} | {speedup(tbo_small_batch(32, profile=p)):+.1%} | "
            f"{speedup(tbo_small_batch(256, profile=p)):+.1%} |"
        )
    rows.append("| published | -27% | +25.5% (at 256 tokens in the post's ablation) |")
    return "\n".join(rows)


def tbo_small_batch(
    tokens_per_gpu: int = 32, context: int = 2000, profile: Profile | None = None
) -> float:
    """Step time with TBO over without, minus one, for the decode deployment at a small batch."""
    scenario = load_scenario(ROOT / "scenarios" / "validation" / "sglang-decode-h100.yaml")
    profile = profile or load_profile(scenario.profile or "")
    steps = []
    for name in ("decode_no_tbo", "decode_tbo"):
        d = scenario.deployment(name)
        cm = ServingCostModel(
            load_model(scenario.model),
            load_gpu(scenario.gpu),
            d,  # type: ignore[arg-type]
            profile,
            profile_gpu=load_gpu(profile.device.gpu or scenario.gpu),
        )
        ranks = d.attn_dp  # type: ignore[union-attr]
        n = ranks * tokens_per_gpu
        batch = BatchShape(
            num_ranks=ranks,
            rank=np.repeat(np.arange(ranks), tokens_per_gpu),
            new_tokens=np.ones(n, dtype=np.int64),
            kv_tokens=np.full(n, context),
            is_decode=np.ones(n, dtype=bool),
        )
        steps.append(cm.step_cost(batch).duration_s)
    return steps[1] / steps[0] - 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    args = parser.parse_args()
    text = table()
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
