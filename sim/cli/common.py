"""What every `mlasim` command shares: the console tables print to, the one usage-error helper,
the `--json` flag, output-path checks and the catalog arguments.

Light on purpose: `sim.cli.commands` imports it to build the command group, so it loads no simulator
code at module level (the catalog is imported when an argument is resolved).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from sim.specs.gpu import GpuSpec
    from sim.specs.model import ModelSpec

# metavar "": a flag takes no value, so help shows no `<bool>` after it
JsonFlag = Annotated[bool, typer.Option("--json", metavar="", help="Print JSON for machines.")]

PIPE_WIDTH = 160  # columns for tables written to a pipe or a CI log (terminals use their own)


def output_console() -> Console:
    """The console tables and results print to: a terminal's own width, else wide enough that
    columns stay whole."""
    console = Console()
    return console if console.is_terminal else Console(width=PIPE_WIDTH)


def error_console(*, soft_wrap: bool = False) -> Console:
    """The console errors and progress go to (stderr, so stdout stays the command's output)."""
    return Console(stderr=True, soft_wrap=soft_wrap)


def usage_error(message: str) -> typer.Exit:
    """Print a usage error and return the exit (code 2) for the caller to raise."""
    error_console().print(f"[red]error:[/red] {escape(message)}")
    return typer.Exit(code=2)


def check_output_paths(*paths: Path | None) -> None:
    """Refuse (exit 2) an output file whose folder does not exist, before any work is done."""
    for path in paths:
        if path is not None and not path.parent.is_dir():
            raise usage_error(f"{path}: the folder {path.parent} does not exist; create it first")


def model_arg(name: str) -> ModelSpec:
    """A `--model` value (catalog name or config.json path) as a spec, or a usage error."""
    from sim.catalog import load_model

    try:
        return load_model(name)
    except (LookupError, ValueError) as exc:
        raise usage_error(str(exc)) from exc


def gpu_arg(name: str) -> GpuSpec:
    """A `--gpu` value (catalog name or YAML path) as a spec, or a usage error."""
    from sim.catalog import load_gpu

    try:
        return load_gpu(name)
    except (LookupError, ValueError) as exc:
        raise usage_error(str(exc)) from exc
