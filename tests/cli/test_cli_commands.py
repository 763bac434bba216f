"""The `mlasim` group: every command registered once, listed without loading its module."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sim.cli.commands import COMMANDS, app, load_command

ROOT = Path(__file__).resolve().parents[2]


def _sim_modules_after(code: str) -> list[str]:
    """The `sim` modules a fresh interpreter holds after running `code`."""
    names = "sorted(m for m in sys.modules if m == 'sim' or m.startswith('sim.'))"
    probe = f"{code}\nimport sys\nprint(' '.join({names}))"
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return out.stdout.split()


def test_importing_the_cli_loads_no_simulator_code() -> None:
    loaded = _sim_modules_after("import sim.cli")
    assert loaded and all(m == "sim" or m.startswith("sim.cli") for m in loaded), loaded


def test_help_lists_every_command_without_importing_one() -> None:
    code = (
        "from typer.testing import CliRunner\nfrom sim.cli import app\n"
        "r = CliRunner().invoke(app, ['--help'])\nassert r.exit_code == 0, r.output"
    )
    loaded = _sim_modules_after(code)
    assert not [m for m in loaded if m.startswith("sim.") and not m.startswith("sim.cli")]
    assert "sim.cli.run" not in loaded and "sim.cli.physics" not in loaded
    out = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["--help"]).output
    for name in COMMANDS:
        assert f" {name} " in out


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_listed_summary_is_the_commands_own(name: str) -> None:
    """The summary `mlasim --help` shows is the first paragraph of the command's docstring."""
    command = load_command(name)
    assert command.name == name
    assert (command.help or "").split("\n\n")[0].strip() == COMMANDS[name].summary


def test_every_registered_command_is_listed() -> None:
    """A module's `register` adds exactly the commands the table names for it."""
    import importlib

    import typer

    for module in {e.module for e in COMMANDS.values()}:
        sub = typer.Typer()
        importlib.import_module(module).register(sub)
        names = {c.name or c.callback.__name__ for c in sub.registered_commands}  # type: ignore[union-attr]
        assert names == {n for n, e in COMMANDS.items() if e.module == module}, module


def test_an_unknown_command_is_refused_with_a_suggestion() -> None:
    res = CliRunner().invoke(app, ["modles"])
    assert res.exit_code == 2
    assert "No such command" in res.output and "models" in res.output
