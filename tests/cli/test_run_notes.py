"""What `mlasim run` says beyond its tables: notes on thin or doubtful figures, errors found
before the simulation runs, and output files written even when the reader stops early."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import typer
from typer.testing import CliRunner

from sim.cli import run as cli_run
from sim.io.scenario_io import parse_scenario
from sim.metrics import Results
from sim.metrics.notes import (
    cpu_profile_note,
    empty_note,
    launch_note,
    overload_note,
    rejected_note,
    run_notes,
    unfinished_note,
)
from sim.run import run_scenario, simulate_scenario

SHORT = """\
name: short
model: deepseek-v3
gpu: h200
deployments:
  - {name: dp8, attn_tp: 1}
workload:
  kind: poisson
  rate_req_s: 4
  input: {kind: fixed, tokens: 1000}
  output: {kind: fixed, tokens: 50}
slo: {ttft_s: 2, tpot_s: 0.1}
run: {duration_s: 6, warmup_s: 1, seed: 1}
"""


def _app() -> typer.Typer:
    app = typer.Typer()
    cli_run.register(app)
    return app


def _results(**requests: int) -> Results:
    fields = {"arrived": 100, "completed": 100, "queued": 0, "rejected": 0, **requests}
    counts = SimpleNamespace(**fields)
    dep = SimpleNamespace(
        name="dp8",
        requests=counts,
        kv_capacity_tokens_per_rank=440_384,
        output_tok_s_per_gpu=400.0,
        output_tok_s_per_gpu_ci95=4.0,
        extrapolated_ops=[],
        launch_source=None,
        step_breakdown_s={},
    )
    return cast(Results, SimpleNamespace(deployments=[dep]))


def test_notes_on_unfinished_and_rejected_requests() -> None:
    assert unfinished_note(_results()) is None and rejected_note(_results()) is None
    few = unfinished_note(_results(arrived=190, completed=41))
    assert few is not None and "dp8 41 of 190" in few and "run.duration_s" in few
    assert unfinished_note(_results(arrived=190, completed=64)) is None  # a third is enough
    rej = rejected_note(_results(rejected=44))
    assert rej is not None and "dp8 44 (KV per rank: 440,384 tokens)" in rej


def test_an_overload_is_not_called_a_short_window() -> None:
    """Requests still queued at the end say the load exceeds the deployment: a longer run will
    not finish them, so the note says to lower the load, not to lengthen the run."""
    over = _results(arrived=887, completed=0, queued=887)
    note = overload_note(over)
    assert note is not None and "dp8 887 of 887" in note and "lower the load" in note
    assert unfinished_note(over) is None
    short = _results(arrived=190, completed=41, queued=10)  # few finished, but not queued
    assert overload_note(short) is None and unfinished_note(short) is not None
    # a closed loop's queue is bounded by its users: a longer run settles it
    assert overload_note(over, open_loop=False) is None
    assert unfinished_note(over, open_loop=False) is not None


def test_an_empty_window_is_said() -> None:
    assert empty_note(_results()) is None
    note = empty_note(_results(arrived=0, completed=0))
    assert note is not None and "(dp8)" in note and "run.warmup_s 0" in note


def test_a_cpu_profile_is_named_as_such() -> None:
    cpu = cast(Any, SimpleNamespace(name="mine", device=SimpleNamespace(name="cpu (Xeon)")))
    gpu = cast(Any, SimpleNamespace(name="h200", device=SimpleNamespace(name="NVIDIA H200")))
    note = cpu_profile_note(cpu)
    assert note is not None and "'mine' was measured on a CPU (cpu (Xeon))" in note
    assert cpu_profile_note(gpu) is None and cpu_profile_note(None) is None
    sc = parse_scenario(SHORT)
    assert run_notes(sc, _results(rejected=1), cpu)[0] == note  # most important first


def test_requests_longer_than_the_context_are_refused() -> None:
    long = SHORT.replace("tokens: 1000}", "tokens: 2000000}")
    with pytest.raises(ValueError, match=r"up to 2,000,050 tokens .* 163,840-token context"):
        simulate_scenario(parse_scenario(long))
    # an unbounded answer length: refused only when even the shortest request cannot fit
    unbounded = "output: {kind: lognormal, mean_tokens: 200, sigma: 0.5}"
    sc = parse_scenario(long.replace("output: {kind: fixed, tokens: 50}", unbounded))
    with pytest.raises(ValueError, match=r"every request is at least 2,000,001 tokens"):
        simulate_scenario(sc)


def test_busy_fraction_counts_only_the_window() -> None:
    """A step that straddles the warm-up's end counts only its part inside the window."""
    results = run_scenario(parse_scenario(SHORT))
    for d in results.deployments:
        for pool in d.pools:
            assert 0 < pool.busy_fraction <= 1.0


def test_files_are_written_before_the_tables(tmp_path: Path, monkeypatch: Any) -> None:
    """A reader that closes the pipe early (`| head`) stops the printing, not the files."""
    sc = tmp_path / "short.yaml"
    sc.write_text(SHORT)

    def closed(*_: object) -> None:
        raise BrokenPipeError

    monkeypatch.setattr(cli_run, "results_table", closed)
    out = tmp_path / "r.json"
    res = CliRunner().invoke(_app(), ["run", str(sc), "--json", str(out)])
    assert isinstance(res.exception, BrokenPipeError)
    assert json.loads(out.read_text())["deployments"][0]["name"] == "dp8"


def test_problems_found_before_the_run(tmp_path: Path, monkeypatch: Any) -> None:
    sc = tmp_path / "short.yaml"
    sc.write_text(SHORT)
    res = CliRunner(env={"COLUMNS": "300"}).invoke(
        _app(), ["run", str(sc), "--set", "workload.rate_req_s=2,4"]
    )
    assert res.exit_code == 2 and "use `mlasim sweep`" in res.output
    real = cli_run.importlib.util.find_spec
    monkeypatch.setattr(
        cli_run.importlib.util, "find_spec", lambda n: None if n == "pyarrow" else real(n)
    )
    res = CliRunner(env={"COLUMNS": "300"}).invoke(
        _app(), ["run", str(sc), "--requests", str(tmp_path / "r.parquet")]
    )
    assert res.exit_code == 2 and "needs pyarrow" in res.output
    assert "step time" not in res.output  # refused before simulating


@pytest.mark.parametrize("command", ["", "run", "check", "sweep", "capacity", "memory", "gpus"])
def test_help_shows_no_value_after_a_flag(command: str) -> None:
    from sim.cli import app

    args = [command, "--help"] if command else ["--help"]  # "": the mlasim group itself
    res = CliRunner(env={"COLUMNS": "120"}).invoke(app, args)
    assert res.exit_code == 0 and "--help" in res.output
    assert "<bool>" not in res.output


def test_breakdown_shows_what_two_batch_overlap_saved_or_cost() -> None:
    """The ops add up to the step plus what the overlap saved: a row says it, so the table
    sums to the step it prints last (a cost shows positive)."""
    from rich.console import Console

    from sim.cli.run import breakdown_table

    def dep(name: str, saved: float | None, row: str | None = None) -> SimpleNamespace:
        ops = {"attn_decode": 0.010, "ep_combine": 0.020}
        step = sum(ops.values()) - (saved or 0.0)
        return SimpleNamespace(
            name=name, step_breakdown_s=ops, step_sources={o: "roofline" for o in ops},
            extrapolated_ops=[], overlap_saved_s=saved, step_time_s=step, overlap_row=row,
        )  # fmt: skip

    results = cast(Results, SimpleNamespace(deployments=[dep("off", None), dep("on", 0.008)]))
    console = Console(width=200, record=True)
    console.print(breakdown_table(results))
    lines = [x for x in console.export_text().splitlines() if x.startswith("│")]
    rows = {line.split("│")[1].strip(): line for line in lines}
    assert "-8.000 (overlap)" in rows["two_batch_overlap"]
    assert "22.000" in rows["step"] and "30.000" in rows["step"]
    costly = cast(Results, SimpleNamespace(deployments=[dep("small", -0.018)]))
    console = Console(width=200, record=True)
    console.print(breakdown_table(costly))
    assert "+18.000 (overlap)" in console.export_text()
    # an engine's second stream is its own row, not two-batch overlap's
    mixed = [dep("tbo", 0.008, "two_batch_overlap"), dep("sg", 0.003, "shared_experts_stream")]
    console = Console(width=200, record=True)
    console.print(breakdown_table(cast(Results, SimpleNamespace(deployments=mixed))))
    lines = [x for x in console.export_text().splitlines() if x.startswith("│")]
    rows = {line.split("│")[1].strip(): line.split("│")[2:4] for line in lines}
    assert [c.strip() for c in rows["two_batch_overlap"]] == ["-8.000 (overlap)", "-"]
    assert [c.strip() for c in rows["shared_experts_stream"]] == ["-", "-3.000 (2nd stream)"]
    assert [c.strip() for c in rows["step"]] == ["22.000", "27.000"]


def test_layout_says_what_a_name_may_not() -> None:
    from sim.specs import Deployment, PdDeployment

    d = Deployment(name="tp8", nodes=2, attn_tp=4, moe_tp=2, replicas=3)
    assert d.layout == "attn TP4 x DP4, MoE EP8 x TP2 x3"
    one = Deployment(name="p", attn_tp=1)
    pd = PdDeployment(name="pd", prefill=one, decode=one)
    assert pd.layout == "P: attn TP1 x DP8, MoE EP8 | D: attn TP1 x DP8, MoE EP8"


def test_requests_past_the_context_from_an_unbounded_tail_are_noted() -> None:
    from sim.metrics.notes import context_note

    assert context_note(parse_scenario(SHORT), 163_840) is None  # fixed 1,050 tokens
    tail = "input: {kind: lognormal, mean_tokens: 60000, sigma: 1.0}"
    sc = parse_scenario(SHORT.replace("input: {kind: fixed, tokens: 1000}", tail))
    note = context_note(sc, 163_840)
    assert note is not None and "exceed deepseek-v3's 163,840-token context" in note
    share = float(note.split("about ")[1].split("%")[0]) / 100
    # lognormal, mean 60K, sigma 1 (mu = ln 60000 - 1/2): P(X > 163,790) = 6.63%
    assert 0.06 < share < 0.073
    assert any(n == note for n in run_notes(sc, _results(), None))


def test_the_launch_row_comes_last_and_a_note_says_what_it_holds() -> None:
    from rich.console import Console

    from sim.cli.run import breakdown_table

    def dep(name: str, launch: str | None) -> SimpleNamespace:
        ops = {"attn_decode": 0.010, "kernel_launch": 0.002, "ep_combine": 0.020}
        if launch is None:
            ops.pop("kernel_launch")
        return SimpleNamespace(
            name=name, step_breakdown_s=ops, step_sources={o: "roofline" for o in ops},
            extrapolated_ops=[], overlap_saved_s=None, step_time_s=sum(ops.values()),
            overlap_row=None, launch_source=launch,
        )  # fmt: skip

    both = [dep("sglang", "1.93 us a kernel: a source"), dep("plain", "5.22 us a kernel: b")]
    results = cast(Results, SimpleNamespace(deployments=both))
    console = Console(width=200, record=True)
    console.print(breakdown_table(results))
    lines = [x for x in console.export_text().splitlines() if x.startswith("│")]
    rows = [x.split("│")[1].strip() for x in lines]
    assert rows == ["attn_decode", "ep_combine", "kernel_launch"]
    note = launch_note(results)
    assert note is not None and "at 1.93 us a kernel / 5.22 us a kernel" in note
    assert launch_note(cast(Results, SimpleNamespace(deployments=[dep("none", None)]))) is None
