"""Names in `expect:` lines are checked against what the run will report when the file loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.io.scenario_io import ScenarioError, load_scenario, parse_scenario

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
BASE = """\
name: names
model: deepseek-v3
gpu: h200
deployments:
  - {name: tp8, attn_tp: 8, moe_tp: 8}
  - name: pd
    prefill: {name: p, attn_tp: 1}
    decode: {name: d, attn_tp: 1}
workload: {kind: poisson, rate_req_s: 1, input: {kind: fixed, tokens: 100},
           output: {kind: fixed, tokens: 10}}
probes:
  even: {kind: step_cost, model: deepseek-v3, gpu: h200, deployment: {attn_tp: 1},
         requests_per_rank: [16], kv_tokens: [8192]}
slo: {ttft_s: 2.0, tpot_s: 0.1}
run: {duration_s: 5, warmup_s: 1}
expect:
"""


def _load(*claims: str) -> None:
    parse_scenario(BASE + "".join(f"  - {c!r}\n" for c in claims))


def test_every_name_a_run_reports_is_accepted() -> None:
    _load(
        "tp8.ttft_s.p90 < 10 and tp8.requests.completed >= 0",
        "pd.pools.decode.dp_imbalance >= 1 and pd.pools.prefill.busy_fraction <= 1",
        "tp8.pools.tp8.steps > 0 and tp8.step_breakdown_s.attn_decode > 0",  # ops on trust
        "scenario.slo_ttft_s > 0 and even.ops.attn_decode > 0",  # probes on trust
        "abs(tp8.kv_dup_factor - 8) < 1e-9 and rel_err(max(tp8.gpus, 1), 8) < 0.1",
    )


@pytest.mark.parametrize(
    ("claim", "fragments"),
    [
        ("tp8.output_tok_s_per_gpux > 1", ["no 'output_tok_s_per_gpux' under 'tp8'",
                                             "did you mean 'output_tok_s_per_gpu'"]),
        ("tp9.goodput_req_s > 0", ["no 'tp9' at the top level", "did you mean 'tp8'"]),
        ("pd.pools.decoder.steps > 0", ["no 'decoder' under 'pd.pools'", "'decode'"]),
        ("tp8.ttft_s.p95 < 1", ["no 'p95' under 'tp8.ttft_s'", "p50, p90, p99"]),
        ("tp8.ttft_s < 1", ["'tp8.ttft_s' is a group of values, not a number"]),
        ("tp8.gpus.total > 1", ["'tp8.gpus' is a value, it has no 'total'"]),
        ("scenario.slo_ttft > 0", ["did you mean 'slo_ttft_s'"]),
        ("tp8.profile == 1", ["'tp8.profile' is text or a list, not a number"]),
    ],
)  # fmt: skip
def test_a_misspelt_name_fails_at_load_with_what_exists(claim: str, fragments: list[str]) -> None:
    with pytest.raises(ScenarioError) as err:
        _load("tp8.gpus == 8", claim)
    text = str(err.value)
    assert "expect[1]" in text, text
    for fragment in fragments:
        assert fragment in text, text


def test_the_library_names_only_what_its_runs_report() -> None:
    for path in [*SCENARIOS.glob("*.yaml"), *SCENARIOS.glob("validation/*.yaml")]:
        load_scenario(path)  # raises on any unknown name


def test_every_number_a_real_run_reports_passes_the_load_check() -> None:
    """No false refusals: each numeric path in a real run's namespace (a unit and a PD pair,
    pools and ops included) is accepted by the shape the load check uses."""
    from sim.checks.claim_names import scenario_shape, unknown
    from sim.checks.namespace import build_namespace
    from sim.run import run_scenario

    busy = BASE.replace("rate_req_s: 1,", "rate_req_s: 40,")  # enough for every figure
    text = busy.replace("duration_s: 5, warmup_s: 1", "duration_s: 4, warmup_s: 0.5")
    sc = parse_scenario(text + "  - tp8.gpus == 8\n")
    ns = build_namespace(run_scenario(sc).model_dump(mode="json"))
    shape = scenario_shape(sc)

    def leaves(node: object, path: str) -> list[str]:
        if isinstance(node, dict):
            return [p for k, v in node.items() for p in leaves(v, f"{path}.{k}" if path else k)]
        return [path] if isinstance(node, int | float) else []  # bools are ints too

    paths = leaves(ns, "")
    assert len(paths) > 150 and "pd.pools.decode.step_breakdown_s.attn_decode" in paths
    refused = {p: unknown(p, shape) for p in paths if unknown(p, shape) is not None}
    assert refused == {}
