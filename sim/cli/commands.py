"""The `mlasim` command: the Typer app, and every command registered in one place.

Commands load lazily: the group knows each command's name, module and one-line summary, and a
command's module (with the simulator code it needs) is imported only when that command runs or
shows its own help. `mlasim --help` prints the summaries without importing any of them, so the
CLI starts in the time Typer and rich take to import (`bench/bench_cli.py` measures it).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator, MutableMapping
from typing import Any, NamedTuple

import typer
from typer.core import TyperCommand, TyperGroup

from sim.cli.common import usage_error


class Entry(NamedTuple):
    """One command: the module whose `register(app)` adds it, and the first paragraph of its
    help (what `mlasim --help` lists; a test checks it against the command's own docstring)."""

    module: str
    summary: str


# in `mlasim --help` order; help texts are rich markup ('\\[' is a literal bracket)
COMMANDS: dict[str, Entry] = {
    "cost": Entry(
        "sim.cli.physics",
        "Absorb vs expand FLOPs, bytes and intensity of one MLA layer; what each policy picks.",
    ),
    "ai": Entry(
        "sim.cli.physics",
        "Decode-attention arithmetic intensity of MHA/GQA/MQA/MLA at S = 1..4 beside the ridge.",
    ),
    "memory": Entry(
        "sim.cli.memory",
        "Per-GPU weights, KV bytes per token, duplication factor and KV capacity.",
    ),
    "models": Entry("sim.cli.catalog", "The bundled model catalog."),
    "gpus": Entry(
        "sim.cli.catalog",
        "The bundled GPU catalog: datasheet peaks, and the memory each GPU exposes.",
    ),
    "profiles": Entry(
        "sim.cli.catalog",
        "The bundled calibration profiles: engine and version, what their kernels are, which op\n"
        "families are measured, published or roofline, tables and measured crossover.",
    ),
    "calibrate": Entry(
        "sim.cli.launchers",
        "Time the real kernels on this machine's GPU (or CPU) and write a profile.",
    ),
    "app": Entry(
        "sim.cli.launchers",
        "Start the Streamlit capacity-planning app on a local port (needs 'mlasim\\[app]').",
    ),
    "run": Entry(
        "sim.cli.run", "Simulate every deployment of a scenario and print them side by side."
    ),
    "schema": Entry("sim.cli.run", "Print the JSON Schema of scenario files."),
    "check": Entry(
        "sim.cli.check",
        "Run scenario files, evaluate their `expect:` lines and compare golden summaries.",
    ),
    "sweep": Entry(
        "sim.cli.search", "Run a grid of scenario variants: every combination of the --set values."
    ),
    "capacity": Entry(
        "sim.cli.search",
        "Highest arrival rate each deployment serves within the SLO; GPUs for --target-rate.",
    ),
    "validate": Entry(
        "sim.cli.validate",
        "Simulate measured deployments (coverage, MAPE per group, ranking agreement, worst rows).",
    ),
    "plan": Entry(
        "sim.cli.plan",
        "Search deployments (layout, MTP, KV dtype, PD or not, replicas) for a target load.",
    ),
    "compare-bench": Entry(
        "sim.cli.bench",
        "Print a measured serving benchmark beside the same benchmark simulated.",
    ),
}


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


def load_command(name: str) -> Any:
    """The click command `name`, built by importing its module and running its `register`."""
    sub = typer.Typer()
    importlib.import_module(COMMANDS[name].module).register(sub)
    for info in sub.registered_commands:
        if info.cls in (None, TyperCommand):
            info.cls = FlagsTakeNoValue
    return typer.main.get_group(sub).commands[name]


class _LazyCommands(MutableMapping[str, Any]):
    """The group's commands: every name known up front, each command built on first use."""

    def __init__(self) -> None:
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            if name not in COMMANDS:
                raise KeyError(name)
            self._built[name] = load_command(name)
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter([*COMMANDS, *(n for n in self._built if n not in COMMANDS)])

    def __len__(self) -> int:
        return len(set(COMMANDS) | set(self._built))


_SUMMARIES_ONLY = "mlasim.summaries_only"  # set in ctx.meta while the group prints its help


class LazyGroup(TyperGroup):
    """The `mlasim` group: commands load on use, and its own help lists their summaries (its
    `--help` is a flag too, so it shows no value after it)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.commands = _LazyCommands()

    def get_params(self, ctx: Any) -> Any:
        return _flags_without_placeholder(super().get_params(ctx))

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if ctx.meta.get(_SUMMARIES_ONLY) and cmd_name in COMMANDS:
            return TyperCommand(cmd_name, help=COMMANDS[cmd_name].summary)
        return self.commands.get(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        ctx.meta[_SUMMARIES_ONLY] = True
        try:
            super().format_help(ctx, formatter)
        finally:
            del ctx.meta[_SUMMARIES_ONLY]


app = typer.Typer(
    name="mlasim",
    help="Simulate GPU clusters serving MLA + MoE models; compare deployments.",
    no_args_is_help=True,
    add_completion=False,
    cls=LazyGroup,
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
        raise usage_error(f"--limits {limits}: known sets are {', '.join(SETS)}")
    if limits != "default" or ENV not in os.environ:
        os.environ[ENV] = limits  # spawn-started workers inherit it


def main() -> None:
    app()
