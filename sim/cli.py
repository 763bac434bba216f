"""The `mlasim` command: physics, catalog, simulation, checks, calibration and the app."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer
from rich.console import Console

from sim import cli_physics
from sim.cli_catalog import register as register_catalog
from sim.cli_check import register as register_check
from sim.cli_run import register as register_run
from sim.cli_search import register as register_search

app = typer.Typer(
    name="mlasim",
    help="Simulate GPU clusters serving MLA + MoE models; compare deployments.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()

app.command()(cli_physics.cost)
app.command()(cli_physics.ai)
app.command()(cli_physics.memory)
register_catalog(app)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def calibrate(ctx: typer.Context) -> None:
    """Time the real kernels on this machine's GPU (or CPU) and write a profile.

    Arguments are passed to `python -m kernels_calib` (see its --help).
    """
    from kernels_calib.__main__ import main as calib_main

    raise typer.Exit(code=calib_main(list(ctx.args)))


@app.command(name="app")
def run_app(port: int = typer.Option(8501, help="Local port.")) -> None:
    """Start the Streamlit capacity-planning app on a local port."""
    script = Path(__file__).resolve().parent.parent / "app" / "streamlit_app.py"
    if not script.exists():
        raise cli_physics.usage_error(f"app not found at {script}")
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
    ]
    raise typer.Exit(code=subprocess.call(cmd))


register_run(app)
register_check(app)
register_search(app)


def main() -> None:
    app()
