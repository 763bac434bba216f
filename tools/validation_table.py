"""Predicted vs published for the SGLang EP deployment (docs/validation.md's table).

Runs the scenarios in scenarios/validation/ and prints a Markdown table of each published figure
beside the simulator's prediction and the relative error. The published figures below are for
checking only: nothing in the simulator is fitted to them.

    python tools/validation_table.py [--out docs/validation-table.md]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sim.io.scenario_io import load_scenario
from sim.run import run_scenario

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
        "prefill",
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
    return "\n".join(rows)


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
