"""What the calibration and app commands say when an extra is missing or an input is wrong.

A missing package is simulated with `sys.modules[name] = None` in a child interpreter, which makes
`import name` raise ImportError as it does on a core install (`make run`) without the extras.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

import sim.cli
import sim.cli.launchers
from kernels_calib import cli, report
from kernels_calib.runner import calibrate
from kernels_calib.writer import write_profile
from sim.catalog import load_gpu
from sim.catalog.profiles import load_profile
from sim.specs.profile import CrossoverPoint

ROOT = Path(__file__).resolve().parents[2]
TORCH_HINT = "calibration needs torch: pip install 'mlasim[calib]' (or make calibrate: "


def run_without(
    blocked: tuple[str, ...], entry: str, *args: str, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """Run `python -m kernels_calib ARGS` (entry 'kernels_calib') or `mlasim ARGS` (entry
    'mlasim') in a child, from `cwd`, where the `blocked` modules cannot be imported."""
    start = (
        "runpy.run_module('kernels_calib', run_name='__main__')"
        if entry == "kernels_calib"
        else "from sim.cli import main; main()"
    )
    code = (
        f"import runpy, sys\nfor m in {blocked!r}: sys.modules[m] = None\n"
        f"sys.argv = [{entry!r}, *{list(args)!r}]\n{start}"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_help_works_without_torch() -> None:
    res = run_without(("torch",), "kernels_calib", "--help")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("usage: python -m kernels_calib")
    assert "mla_decode,mla_prefill,gemm,moe,dsa,elementwise,comm" in res.stdout
    assert "pip install 'mlasim[calib]'" in res.stdout and res.stderr == ""


def test_report_of_a_bundled_profile_works_without_torch() -> None:
    res = run_without(("torch",), "kernels_calib", "report", "h800-published")
    assert res.returncode == 0, res.stderr
    assert "Profile h800-published (published)" in res.stdout
    assert "long-prefix limit 171" in res.stdout and "Traceback" not in res.stderr


@pytest.mark.parametrize(
    ("entry", "args", "line"),
    [
        ("kernels_calib", ("--device", "cpu", "--quick", "--out", "p.json"), TORCH_HINT),
        ("mlasim", ("calibrate", "--device", "cpu", "--quick", "--out", "p.json"), TORCH_HINT),
        ("kernels_calib", ("plan", "--quick"), "plan needs torch: pip install 'mlasim[calib]'"),
    ],
)
def test_timing_kernels_without_torch_is_one_line_and_exit_2(
    entry: str, args: tuple[str, ...], line: str, tmp_path: Path
) -> None:
    res = run_without(("torch",), entry, *args, cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.startswith(f"error: {line}") and res.stderr.count("\n") == 1
    assert "calibrates into profiles/local.json" in res.stderr  # what `make calibrate` does
    assert "Traceback" not in res.stderr and res.stdout == ""
    assert list(tmp_path.iterdir()) == []  # nothing written


def _refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert cli.main(args) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: ") and err.count("\n") == 1
    return err


def test_report_of_an_unknown_profile_lists_the_known_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _refused(["report", "nope.json"], capsys)
    assert "unknown profile 'nope.json': known profiles are " in err
    assert "h800-published" in err and "or give a path to an existing .json file" in err


def test_report_of_a_file_that_is_not_json_says_what_it_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    err = _refused(["report", str(bad)], capsys)
    assert f"{bad}: not valid JSON (" in err
    assert "report reads profile JSON as `python -m kernels_calib --out FILE` writes it" in err


def test_report_against_an_unknown_gpu_lists_the_known_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _refused(["report", "h800-published", "--gpu", "h300"], capsys)
    assert err.startswith("error: --gpu: unknown gpu 'h300': known gpus are ")
    assert "h800" in err


def test_app_without_streamlit_names_the_extra_and_exits_2(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "streamlit", None)

    def no_launch(cmd: list[str]) -> int:
        raise AssertionError(f"launched {cmd} without streamlit")

    monkeypatch.setattr(sim.cli.launchers.subprocess, "call", no_launch)
    res = CliRunner(env={"COLUMNS": "60"}).invoke(sim.cli.app, ["app"])
    assert res.exit_code == 2
    expected = (
        "error: the app needs streamlit: pip install 'mlasim[app]' "
        "(or make app: installs all extras into .venv, then starts it)\n"
    )
    assert res.output == expected  # one line even in a narrow terminal


def test_report_of_a_cpu_profile_says_so_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = calibrate(device="cpu", quick=True, ops=["elementwise"], show_progress=False)
    path = write_profile(profile, tmp_path / "cpu.json")
    assert cli.main(["report", str(path)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"measured on CPU ({profile.device.name}): ")
    assert "efficiencies are not a GPU's" in first
    assert cli.main(["report", "h800-published"]) == 0
    assert "measured on CPU" not in capsys.readouterr().out


def _rendered(crossover: list[CrossoverPoint]) -> str:
    profile = load_profile("h800-published").model_copy(update={"crossover": crossover})
    buf = io.StringIO()
    report.render(profile, Console(file=buf, width=400), load_gpu("h800"), every_table=False)
    return buf.getvalue()


def test_the_crossover_formula_is_labelled_with_its_prefix() -> None:
    # q* = a k / (a + (c - e) k), a = 512 x 256, c - e = 768: at k = 512, q* = 128 exactly
    timed = dict(prefix_len_tokens=512, new_tokens=[8, 32, 128], absorb_us=[1.0, 2.0, 9.0])
    out = _rendered(
        [
            CrossoverPoint(**timed, expand_us=[5.0, 6.0, 10.0], status="absorb_faster"),
            CrossoverPoint(
                **{**timed, "prefix_len_tokens": 4096},
                expand_us=[5.0, 6.0, 7.0],
                status="crossed",
                crossover_new_tokens=100.0,
            ),
        ]
    )
    assert "at prefix 512: 128; at prefix 4096: 164; long-prefix limit 171" in out
    assert "at prefix 512: absorb faster at all 8-128 new tokens timed; at prefix 4096: 100" in out
    assert "~171 (long prefix)" in out
