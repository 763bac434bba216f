"""`mlasim calibrate` and `mlasim app`: the commands that hand over to another program
(`python -m kernels_calib`, Streamlit)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import typer
from rich.markup import escape

from sim.cli.common import error_console, usage_error

APP_MODULES = ("streamlit", "plotly", "pandas")  # the `app` extra in pyproject.toml
# `make app` installs every extra into .venv (torch's CPU build too), then runs `mlasim app`
APP_INSTALL = (
    "pip install 'mlasim[app]' (or make app: installs all extras into .venv, then starts it)"
)
APP_SCRIPT = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"


# help texts are rich markup: '\\[' keeps the extras' brackets from reading as a style tag
def calibrate(ctx: typer.Context) -> None:
    """Time the real kernels on this machine's GPU (or CPU) and write a profile.

    Arguments are passed to `python -m kernels_calib` (see its --help). Needs torch:
    pip install 'mlasim\\[calib]'.
    """
    from kernels_calib.cli import main as calib_main

    raise typer.Exit(code=calib_main(list(ctx.args)))


def run_app(port: int = typer.Option(8501, help="Local port.")) -> None:
    """Start the Streamlit capacity-planning app on a local port (needs 'mlasim\\[app]')."""
    script = APP_SCRIPT
    if not script.exists():
        raise usage_error(f"app not found at {script}")
    # checked here: without them `python -m streamlit` fails in the child with a bare import error
    missing = [m for m in APP_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        error_console(soft_wrap=True).print(  # one line, however narrow the terminal
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


def register(app: typer.Typer) -> None:
    """Add `calibrate` and `app` to the `mlasim` app."""
    extra = {"allow_extra_args": True, "ignore_unknown_options": True}
    app.command(context_settings=extra)(calibrate)
    app.command(name="app")(run_app)
