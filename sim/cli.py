"""The `mlasim` command: physics, catalog, simulation, checks, calibration and the app."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

from sim import cli_memory, cli_physics
from sim.cli_bench import register as register_bench
from sim.cli_catalog import register as register_catalog
from sim.cli_check import register as register_check
from sim.cli_plan import register as register_plan
from sim.cli_run import register as register_run
from sim.cli_search import register as register_search
from sim.cli_validate import register as register_validate


def _flags_without_placeholder(params: Any) -> Any:
    """Typer's rich help prints a type placeholder after every option, so `--json <bool>` read
    as if the flag took a value: flags get an empty metavar instead."""
    for p in params:  # typer's own click classes: duck-typed
        if getattr(p, "is_flag", False) and p.metavar is None:
            p.metavar = ""
    return params


class FlagsTakeNoValue(TyperCommand):
    """A command whose help shows no value after a flag."""

    def get_params(self, ctx: Any) -> Any:
        return _flags_without_placeholder(super().get_params(ctx))


class GroupFlagsTakeNoValue(TyperGroup):
    """The `mlasim` group itself: its `--help` is a flag too."""

    def get_params(self, ctx: Any) -> Any:
        return _flags_without_placeholder(super().get_params(ctx))


app = typer.Typer(
    name="mlasim",
    help="Simulate GPU clusters serving MLA + MoE models; compare deployments.",
    no_args_is_help=True,
    add_completion=False,
    cls=GroupFlagsTakeNoValue,
)
console = Console()
APP_MODULES = ("streamlit", "plotly", "pandas")  # the `app` extra in pyproject.toml
# `make app` installs every extra into .venv (torch's CPU build too), then runs `mlasim app`
APP_INSTALL = (
    "pip install 'mlasim[app]' (or make app: installs all extras into .venv, then starts it)"
)


@app.callback()
def _limits(
    limits: str = typer.Option(
        "default",
        "--limits",
        help="Input size limits: 'default' or 'big' (a machine with hundreds of GB); sets "
        "$MLASIM_LIMITS for this run and its workers. See docs/limits.md.",
    ),
) -> None:
    from sim.specs.limits import ENV, SETS

    if limits not in SETS:
        raise cli_physics.usage_error(f"--limits {limits}: known sets are {', '.join(SETS)}")
    if limits != "default" or ENV not in os.environ:
        os.environ[ENV] = limits  # spawn-started workers inherit it


app.command()(cli_physics.cost)
app.command()(cli_physics.ai)
app.command()(cli_memory.memory)
register_catalog(app)


# help texts are rich markup: '\\[' keeps the extras' brackets from reading as a style tag
@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def calibrate(ctx: typer.Context) -> None:
    """Time the real kernels on this machine's GPU (or CPU) and write a profile.

    Arguments are passed to `python -m kernels_calib` (see its --help). Needs torch:
    pip install 'mlasim\\[calib]'.
    """
    from kernels_calib.cli import main as calib_main

    raise typer.Exit(code=calib_main(list(ctx.args)))


@app.command(name="app")
def run_app(port: int = typer.Option(8501, help="Local port.")) -> None:
    """Start the Streamlit capacity-planning app on a local port (needs 'mlasim\\[app]')."""
    script = Path(__file__).resolve().parent.parent / "app" / "streamlit_app.py"
    if not script.exists():
        raise cli_physics.usage_error(f"app not found at {script}")
    # checked here: without them `python -m streamlit` fails in the child with a bare import error
    missing = [m for m in APP_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        Console(stderr=True, soft_wrap=True).print(  # one line, however narrow the terminal
            f"[red]error:[/red] the app needs {escape(', '.join(missing))}: {escape(APP_INSTALL)}"
        )
        raise typer.Exit(code=2)
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(script),
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--server.maxUploadSize",
        "16",
        "--client.showErrorDetails",
        "none",
    ]
    raise typer.Exit(code=subprocess.call(cmd))


register_run(app)
register_check(app)
register_search(app)
register_validate(app)
register_plan(app)
register_bench(app)


for _command in app.registered_commands:
    if _command.cls in (None, TyperCommand):
        _command.cls = FlagsTakeNoValue


def main() -> None:
    app()
