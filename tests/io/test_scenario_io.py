"""Scenario files: valid ones load; errors name the file, the line and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.io.scenario_io import ScenarioError, load_scenario, parse_scenario
from sim.specs import Deployment, PdDeployment, Scenario

GOOD = """\
name: study
model: deepseek-v3
gpu: h200
deployments:
  - name: tp8
    attn_tp: 8
    moe_tp: 8
  - name: pd
    prefill: {name: p, attn_tp: 1}
    decode: {name: d, attn_tp: 1, mtp_draft_tokens: 1, mtp_acceptance: [0.8]}
workload:
  kind: poisson
  rate_req_s: 2
  input: {kind: fixed, tokens: 1000}
  output: {kind: fixed, tokens: 100}
slo: {ttft_s: 2, tpot_s: 0.1}
run: {duration_s: 30, warmup_s: 5, seed: 1}
expect: ["tp8.gpus == 8"]
"""


def _error(tmp_path: Path, text: str) -> ScenarioError:
    p = tmp_path / "s.yaml"
    p.write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(p)
    return info.value


def test_good_scenario_loads_with_pd_detected(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(GOOD)
    s = load_scenario(p)
    assert isinstance(s, Scenario) and isinstance(s.deployments[1], PdDeployment)
    assert s.expect == ["tp8.gpus == 8"]


def test_misspelt_field_names_line_and_field(tmp_path: Path) -> None:
    err = _error(tmp_path, GOOD.replace("    moe_tp: 8", "    moe_tpp: 8"))
    assert f"{tmp_path / 's.yaml'}:7: deployments[0].moe_tpp: unknown field" in str(err)


def test_nested_pd_field_line(tmp_path: Path) -> None:
    err = _error(
        tmp_path, GOOD.replace("decode: {name: d, attn_tp: 1,", "decode: {name: d, attn_tp: 0,")
    )
    assert ":10: deployments[1].decode.attn_tp:" in str(err)


def test_unknown_workload_kind_lists_known(tmp_path: Path) -> None:
    err = _error(tmp_path, GOOD.replace("kind: poisson", "kind: poison"))
    msg = str(err)
    assert ":12: workload:" in msg and "'poisson', 'gamma', 'closed', 'trace'" in msg


def test_missing_field_points_at_its_block(tmp_path: Path) -> None:
    err = _error(tmp_path, GOOD.replace("  rate_req_s: 2\n", ""))
    assert ":12: workload.rate_req_s: Field required" in str(err)


def test_cross_checks_with_the_model(tmp_path: Path) -> None:
    heads = GOOD.replace(
        "    attn_tp: 8\n    moe_tp: 8", "    gpus_per_node: 6\n    attn_tp: 6\n    moe_tp: 6"
    )
    err = _error(tmp_path, heads)
    assert ":7: deployments[0].attn_tp:" in str(err) and "divisor of 128" in str(err)
    err = _error(tmp_path, GOOD.replace("prefill: {name: p,", "prefill: {name: p, dsa: 'on',"))
    assert ":9: deployments[1].prefill.dsa:" in str(err) and "no DSA indexer" in str(err)


def test_deployment_names_are_unique_identifiers(tmp_path: Path) -> None:
    err = _error(tmp_path, GOOD.replace("name: tp8", "name: tp-8"))
    assert ":5: deployments[0].name:" in str(err) and "'tp_8'" in str(err)
    err = _error(tmp_path, GOOD.replace("name: pd", "name: tp8"))
    assert "deployments[1].name='tp8' is used twice" in str(err)


def test_unknown_model_lists_catalog(tmp_path: Path) -> None:
    err = _error(tmp_path, GOOD.replace("model: deepseek-v3", "model: deepseek-v9"))
    assert ":2: model:" in str(err) and "deepseek-v3" in str(err)


def test_yaml_syntax_error_has_a_line() -> None:
    with pytest.raises(ScenarioError, match=r"x.yaml:3: \(yaml\)"):
        parse_scenario("name: a\nmodel: b\n  - : [\n", "x.yaml")


def test_run_needs_an_end() -> None:
    with pytest.raises(ScenarioError, match="give duration_s or max_requests"):
        parse_scenario(GOOD.replace("run: {duration_s: 30, warmup_s: 5, seed: 1}", "run: {}"))


def test_trace_path_is_relative_to_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("arrival_s,input_tokens,output_tokens\n0,10,2\n")
    text = GOOD.replace(
        "  kind: poisson\n  rate_req_s: 2\n  input: {kind: fixed, tokens: 1000}\n"
        "  output: {kind: fixed, tokens: 100}\n",
        "  kind: trace\n  path: t.csv\n",
    )
    p = tmp_path / "s.yaml"
    p.write_text(text)
    assert load_scenario(p).workload.path == str(tmp_path / "t.csv")  # type: ignore[union-attr]


def test_unknown_profile_names_line_and_known_profiles(tmp_path: Path) -> None:
    err = _error(tmp_path, GOOD.replace("gpu: h200\n", "gpu: h200\nprofile: h900-measured\n"))
    msg = str(err)
    assert f"{tmp_path / 's.yaml'}:4: profile: unknown profile 'h900-measured'" in msg
    assert "h800-published" in msg and "profile: profile:" not in msg


def test_profile_file_that_is_not_a_profile(tmp_path: Path) -> None:
    (tmp_path / "empty.json").write_text("")
    err = _error(tmp_path, GOOD.replace("gpu: h200\n", "gpu: h200\nprofile: empty.json\n"))
    assert f":4: profile: {tmp_path / 'empty.json'}: not valid JSON" in str(err)
    (tmp_path / "p.parquet").write_bytes(b"PAR1\x00\xff")  # a profile is JSON only
    err = _error(
        tmp_path, GOOD.replace("gpu: h200\n", f"gpu: h200\nprofile: {tmp_path}/p.parquet\n")
    )
    assert ":4: profile:" in str(err) and ".parquet files are not read" in str(err)


def test_catalog_errors_name_their_field_once(tmp_path: Path) -> None:
    err = _error(tmp_path, GOOD.replace("model: deepseek-v3", "model: deepseek-v9"))
    assert ":2: model: unknown model 'deepseek-v9'" in str(err) and "model: model:" not in str(err)
    err = _error(tmp_path, GOOD.replace("gpu: h200", "gpu: h900"))
    assert ":3: gpu: unknown gpu 'h900'" in str(err) and "gpu: gpu:" not in str(err)


def test_router_and_mla_policy_are_checked_on_load(tmp_path: Path) -> None:
    text = GOOD.replace("    moe_tp: 8\n", "    moe_tp: 8\n    mla_policy: fastest\n").replace(
        "prefill: {name: p, attn_tp: 1}", "prefill: {name: p, attn_tp: 1, router: random}"
    )
    msg = str(_error(tmp_path, text))
    assert ":8: deployments[0].mla_policy: Input should be 'sglang', 'vllm' or " in msg
    assert "'flops_optimal', not 'fastest'" in msg
    assert ":10: deployments[1].prefill.router: Input should be 'round_robin'" in msg


def test_negative_fixed_length_gives_the_real_minimum(tmp_path: Path) -> None:
    msg = str(_error(tmp_path, GOOD.replace("tokens: 1000}", "tokens: -5}")))
    assert ":14: workload.input.tokens: tokens=-5 is negative" in msg
    assert "at least 1 for input and output" in msg and "tokens: 1" in msg
    assert ">= 0" not in msg and "tokens.tokens" not in msg


def test_a_folder_is_not_a_scenario_file(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(GOOD)
    with pytest.raises(ScenarioError, match="is a folder, not a scenario file") as info:
        load_scenario(tmp_path)
    assert str(tmp_path / "a.yaml") in str(info.value)


def test_expert_zipf_exponent_and_its_former_name(tmp_path: Path) -> None:
    for key in ("expert_zipf_exponent", "expert_zipf_s"):
        s = parse_scenario(GOOD.replace("    moe_tp: 8\n", f"    moe_tp: 8\n    {key}: 1.2\n"))
        dep = s.deployments[0]
        assert isinstance(dep, Deployment) and dep.expert_zipf_exponent == 1.2
        assert s.model_dump(mode="json")["deployments"][0]["expert_zipf_exponent"] == 1.2
        assert Scenario.model_validate_json(s.model_dump_json()) == s  # what workers receive


def test_pd_pools_take_their_role_from_the_pair(tmp_path: Path) -> None:
    s = parse_scenario(GOOD.replace("prefill: {name: p,", "prefill: {name: p, role: colocated,"))
    pd = s.deployments[1]
    assert isinstance(pd, PdDeployment)
    assert (pd.prefill.role, pd.decode.role) == ("prefill", "decode")
    err = _error(tmp_path, GOOD.replace("decode: {name: d,", "decode: {name: d, role: prefill,"))
    assert ":10: deployments[1].decode: decode.role='prefill': the decode pool" in str(err)


def test_malformed_claim_is_rejected_on_load() -> None:
    """`mlasim run` loads through parse_scenario too, so it refuses a claim that cannot parse
    before simulating anything."""
    text = (Path(__file__).resolve().parents[2] / "scenarios" / "default.yaml").read_text()
    good = "  - tp8.kv_dup_factor == 8"
    line = text.splitlines().index(good) + 1
    with pytest.raises(ScenarioError) as err:
        parse_scenario(text.replace(good, "  - tp8.kv_dup_factor = 8"), "s.yaml")
    assert f"s.yaml:{line}: expect[0]: syntax error at column 19" in str(err.value)
    assert "write '=='" in str(err.value)
