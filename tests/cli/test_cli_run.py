"""`mlasim run` and `mlasim schema` through Typer, with the real cost model on a short run."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from sim.cli.run import register
from sim.io.scenario_io import load_scenario
from tests.builders import SHORT_TEXT as SHORT

ROOT = Path(__file__).resolve().parents[2]


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def test_run_prints_reasons_and_writes_files(tmp_path: Path) -> None:
    sc = tmp_path / "short.yaml"
    sc.write_text(SHORT)
    out = tmp_path / "r.json"
    res = CliRunner(env={"COLUMNS": "200"}).invoke(
        _app(), ["run", str(sc), "--json", str(out), "--csv", str(tmp_path / "r.csv"),
                 "--trace", str(tmp_path / "t.json")], terminal_width=200,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    for label in ("KV dup factor", "KV capacity tokens / GPU", "decode batch / rank",
                  "output tok/s / GPU", "TTFT ms p50/p90/p99", "step time by op"):  # fmt: skip
        assert label in res.output
    data = json.loads(out.read_text())
    dup = {d["name"]: d["kv_dup_factor"] for d in data["deployments"]}
    assert dup == {"tp8": 8, "dp8_ep8": 1}
    assert all(d["step_sources"] for d in data["deployments"])
    assert (tmp_path / "r.csv").exists() and (tmp_path / "t.json").exists()


def test_run_reports_scenario_errors_with_exit_code_2(tmp_path: Path) -> None:
    sc = tmp_path / "bad.yaml"
    sc.write_text(SHORT.replace("attn_tp: 8,", "attn_tpp: 8,"))
    res = CliRunner(env={"COLUMNS": "300"}).invoke(_app(), ["run", str(sc)])
    assert res.exit_code == 2
    assert "bad.yaml:5: deployments[0].attn_tpp: unknown field" in res.output.replace("\n", "")


def test_schema_is_json_with_every_top_level_field() -> None:
    res = CliRunner().invoke(_app(), ["schema"])
    assert res.exit_code == 0
    schema = json.loads(res.output)
    assert {"name", "model", "gpu", "deployments", "workload", "slo", "run"} <= set(
        schema["properties"]
    )


def test_bundled_default_scenario_loads() -> None:
    s = load_scenario(ROOT / "scenarios" / "default.yaml")
    assert [d.name for d in s.deployments] == ["tp8", "dp8_ep8"]


def _run(tmp_path: Path, text: str, *args: str) -> tuple[int, str]:
    sc = tmp_path / "s.yaml"
    sc.write_text(text)
    res = CliRunner(env={"COLUMNS": "300"}).invoke(_app(), ["run", str(sc), *args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, " ".join(res.output.split())


def test_bad_profile_is_a_message_with_exit_code_2(tmp_path: Path) -> None:
    code, out = _run(tmp_path, SHORT.replace("gpu: h200\n", "gpu: h200\nprofile: h900-measured\n"))
    assert code == 2 and f"{tmp_path / 's.yaml'}:4: profile: unknown profile 'h900-measured'" in out
    assert "Traceback" not in out
    code, out = _run(tmp_path, SHORT, "--set", "profile=h900")
    assert code == 2 and f"{tmp_path / 's.yaml'}: --set: profile: unknown profile 'h900'" in out


def test_a_deployment_that_does_not_fit_is_named_once(tmp_path: Path) -> None:
    code, out = _run(tmp_path, SHORT, "--set", "deployments.dp8_ep8.mem_fraction=0.3")
    assert code == 2
    assert f"{tmp_path / 's.yaml'}: deployment 'dp8_ep8' does not fit on h200" in out
    assert out.count("dp8_ep8") == 1


def test_a_folder_is_refused_with_a_file_to_try(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(SHORT)
    res = CliRunner(env={"COLUMNS": "300"}).invoke(_app(), ["run", str(tmp_path)])
    out = " ".join(res.output.split())
    assert res.exit_code == 2 and "is a folder, not a scenario file" in out
    assert str(tmp_path / "s.yaml") in out


def test_an_output_in_a_missing_folder_is_refused_before_running(tmp_path: Path) -> None:
    code, out = _run(tmp_path, SHORT, "--json", str(tmp_path / "no" / "r.json"))
    assert code == 2 and f"{tmp_path / 'no' / 'r.json'}: the folder" in out
    assert "does not exist" in out and "step time by op" not in out


def _breakdown_cells(output: str) -> dict[str, list[str]]:
    """The op rows of the 'step time by op' table: op -> one cell per deployment."""
    rows = output[output.index("step time by op") :].splitlines()
    cells = [[c.strip() for c in r.strip("│").split("│")] for r in rows if r.startswith("│")]
    return {c[0]: c[1:] for c in cells}


def test_extrapolated_ops_are_marked_and_the_mark_explained(tmp_path: Path) -> None:
    # H800's published tables priced on H200: efficiencies held, scaled by H200's roofline
    sc = tmp_path / "s.yaml"
    sc.write_text(SHORT.replace("gpu: h200\n", "gpu: h200\nprofile: h800-published\n"))
    out = tmp_path / "r.json"
    res = CliRunner().invoke(_app(), ["run", str(sc), "--json", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    cells = _breakdown_cells(res.output)
    seen = {True: 0, False: 0}  # both kinds of cell must occur for the test to mean anything
    for i, d in enumerate(data["deployments"]):
        for op, source in d["step_sources"].items():
            extrapolated = op in d["extrapolated_ops"]
            want = f"({source}*)" if extrapolated else f"({source})"
            assert cells[op][i].endswith(want), (d["name"], op, cells[op][i])
            seen[extrapolated] += 1
    assert seen[True] > 0 and seen[False] > 0, seen
    note = "* extrapolated: outside a measured grid, or from a table measured on another GPU"
    assert note in " ".join(res.output.split())


def test_no_extrapolation_note_without_extrapolated_ops(tmp_path: Path) -> None:
    code, out = _run(tmp_path, SHORT)  # the GPU's own roofline profile: nothing extrapolated
    assert code == 0 and "step time by op" in out
    assert "(roofline)" in out and "*" not in out and "extrapolated" not in out


def test_run_warns_when_closed_loop_users_move_in_step(tmp_path: Path) -> None:
    closed = SHORT.replace(
        "  kind: poisson\n  rate_req_s: 4\n", "  kind: closed\n  concurrency: 16\n"
    )
    assert closed != SHORT
    out = {}
    for name, text in (
        ("lockstep", closed),
        ("ramped", closed.replace("  input:", "  ramp_s: 2\n  input:")),
    ):
        sc = tmp_path / f"{name}.yaml"
        sc.write_text(text)
        res = CliRunner().invoke(_app(), ["run", str(sc)], env={"COLUMNS": "200"})
        assert res.exit_code == 0, res.output
        out[name] = res.output
    assert "move in step" in out["lockstep"] and "ramp_s" in out["lockstep"]
    assert "move in step" not in out["ramped"]
