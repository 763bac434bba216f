"""The `mlasim` command line (`sim.cli.commands`); one module of this package per command group."""

from sim.cli.commands import app, main

__all__ = ["app", "main"]
