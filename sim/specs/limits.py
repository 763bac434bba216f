"""Size bounds on what one input may ask for, checked before anything runs.

A scenario names sizes (a rate, a duration, a request count, nodes and replicas, token lengths)
from which a run allocates arrays: arrival times and lengths per request, a step log per pool, a
per-rank matrix per step. Unchecked, a typo (`rate_req_s: 1e9`, `nodes: 10000000`) asks numpy for
tens of GiB or an integer it cannot hold, and ends in MemoryError, OverflowError or a killed
process instead of an error naming the field. Every bound below is far above any study the
project's scenarios run (the largest: a few thousand requests per second for minutes, units of
a few hundred GPUs), and each error gives the figure, the limit and the way round it.

Two sets: `default` (a laptop or a shared 2-core, 24 GB machine: a run's arrays stay well under
2 GiB) and `big` (a workstation with hundreds of GB). `MLASIM_LIMITS=big` in the environment (or
`mlasim --limits big ...`, which sets it for the worker processes too) selects the big set.
Read per call, never cached: there is no global mutable state.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sim.specs.base import FieldError

ENV = "MLASIM_LIMITS"


@dataclass(frozen=True)
class Limits:
    """One set of bounds; `docs/limits.md` lists them and what each protects."""

    name: str
    max_depth: int = 24  # nesting of a scenario, profile or config file (ours reach 6)
    max_string_chars: int = 100_000  # one string value (an expect: line, a description)
    max_file_bytes: int = 64 * 2**20  # a scenario, config, profile or trace file
    max_int: int = 2**53  # any integer in an input: exact as a float, far inside int64
    max_requests: int = 2_000_000  # requests one run may create (open loop, trace rows)
    max_in_flight: int = 1_000_000  # closed-loop users
    max_tokens: int = 2**24  # one length (16.8M tokens: 100x the longest context)
    max_empirical_values: int = 1_000_000  # entries of an empirical length list
    max_gpus_per_unit: int = 4096  # nodes x gpus_per_node of one unit
    max_replicas: int = 4096
    max_total_ranks: int = 65_536  # attention ranks of one deployment, all replicas
    max_sim_time_s: float = 1e6  # run.duration_s and ramp_s (11.6 days simulated)
    max_step_log_bytes: int = 2 * 2**30  # one pool's step log
    max_wall_s: float = 3600.0  # wall time of one deployment's simulation


DEFAULT = Limits(name="default")
BIG = Limits(
    name="big",
    max_requests=200_000_000,
    max_in_flight=50_000_000,
    max_empirical_values=50_000_000,
    max_gpus_per_unit=65_536,
    max_replicas=65_536,
    max_total_ranks=4_194_304,
    max_sim_time_s=1e8,
    max_step_log_bytes=64 * 2**30,
    max_wall_s=86_400.0,
)
SETS = {"default": DEFAULT, "big": BIG}


class LimitError(FieldError):
    """An input over a size bound: `field` names it as a reader writes it (`workload.input`,
    `deployments[0] (tp8).replicas`, `(file)`), `loc` is its path in the data (empty for the
    file or the environment), and `message` gives the figure, the limit and the fix."""

    def __init__(self, field: str, message: str, loc: Sequence[str | int] = ()) -> None:
        super().__init__(loc, message, f"{field}: {message}")
        self.field = field


def current_limits() -> Limits:
    """The set named by $MLASIM_LIMITS (default: `default`); an unknown name is an error."""
    name = os.environ.get(ENV, "default").strip() or "default"
    if name not in SETS:
        raise LimitError(f"${ENV}={name!r}", f"known limit sets are {', '.join(SETS)}")
    return SETS[name]


def over_limit(
    field: str, figure: str, limit: str, fix: str, loc: Sequence[str | int] = ()
) -> LimitError:
    how = f"{fix}, or set {ENV}=big (mlasim --limits big) on a machine with the memory"
    return LimitError(field, f"{figure}, over the limit of {limit}; {how}", loc)


Loc = tuple[str | int, ...]


def _walk(data: Any, where: str = "") -> Iterator[tuple[str, Loc, Any, int]]:
    """(path, loc, value, depth) of every leaf and container, iteratively (no recursion
    limit); `path` as a reader writes it, `loc` as keys and indices."""
    stack: list[tuple[str, Loc, Any, int]] = [(where, (), data, 0)]
    while stack:
        path, loc, value, depth = stack.pop()
        yield path, loc, value, depth
        if isinstance(value, dict):
            stack += [
                (f"{path}.{k}" if path else str(k), (*loc, k), v, depth + 1)
                for k, v in value.items()
            ]
        elif isinstance(value, list | tuple):
            stack += [(f"{path}[{i}]", (*loc, i), v, depth + 1) for i, v in enumerate(value)]


# fields where +inf is a documented value: a benchmark client's "send every prompt at once"
INFINITE_OK = frozenset({"workload.request_rate"})


def check_data(data: Any, what: str = "", limits: Limits | None = None) -> None:
    """Shape bounds of parsed data (YAML or JSON): nesting depth, string lengths, finite numbers,
    integers inside `max_int`. LimitError naming the first field over a bound."""
    lim = limits or current_limits()
    for path, loc, value, depth in _walk(data):
        field = f"{what}{path}" if what and path else (path or what or "(file)")
        if depth > lim.max_depth:
            raise LimitError(
                field,
                f"nested {depth} levels deep, over the limit of {lim.max_depth}; "
                "flatten it (scenario blocks are at most a few levels deep)",
                loc,
            )
        if isinstance(value, str) and len(value) > lim.max_string_chars:
            raise LimitError(
                field,
                f"a string of {len(value):,} characters, over the limit of "
                f"{lim.max_string_chars:,}; shorten it",
                loc,
            )
        if isinstance(value, bool):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            if value == math.inf and path in INFINITE_OK:
                continue
            raise LimitError(
                field,
                f"{value} is not a finite number; give a finite value (a very large "
                "target such as 1e6 stands for 'no limit')",
                loc,
            )
        if isinstance(value, int) and abs(value) > lim.max_int:
            raise LimitError(
                field,
                f"{value:.3e} is beyond the largest integer an input may hold "
                f"({lim.max_int:.3e}); give a realistic value",
                loc,
            )
        if isinstance(value, dict) and any(not isinstance(k, str | int) for k in value):
            raise LimitError(field, "mapping keys must be names (strings)", loc)


def check_flow_depth(text: str, limits: Limits | None = None) -> None:
    """LimitError when YAML flow brackets (`[`, `{`) in `text` nest deeper than `max_depth`,
    found by one vectorised pass over the raw text before any parser runs: PyYAML's scanner
    takes time quadratic in the flow collections it holds open (5,000 nested `[` take 1.5-3 s
    to refuse, over 20 s on a loaded machine). Brackets inside quoted strings count too; prose
    does not open 25 brackets without closing them."""
    lim = limits or current_limits()
    raw = text.encode(errors="replace")
    if raw.count(b"[") + raw.count(b"{") <= lim.max_depth:
        return
    import numpy as np

    chars = np.frombuffer(raw, dtype=np.uint8)
    step = ((chars == ord("[")) | (chars == ord("{"))).astype(np.int32)
    step -= ((chars == ord("]")) | (chars == ord("}"))).astype(np.int32)
    depth = np.cumsum(step)
    at = int(np.argmax(depth))
    if depth[at] > lim.max_depth:
        line = raw.count(b"\n", 0, at) + 1
        raise LimitError(
            "(yaml)",
            f"line {line}: brackets nested {int(depth[at])} deep, over the limit of "
            f"{lim.max_depth}; flatten it (scenario blocks are at most a few levels deep)",
        )


def check_text_size(size_bytes: int, what: str, limits: Limits | None = None) -> None:
    lim = limits or current_limits()
    if size_bytes > lim.max_file_bytes:
        raise over_limit(
            what, f"a file of {size_bytes / 2**20:,.1f} MiB", f"{lim.max_file_bytes / 2**20:g} MiB",
            "split or shorten it",
        )  # fmt: skip


def step_log_bytes(rows: int, ranks_per_unit: int, ops: int) -> int:
    """Bytes a step log of `rows` steps holds (`sim.engine.log.StepLog`'s columns): 11 scalar
    columns of 8 bytes (one of 4), a 4-byte count per rank, 9 bytes (seconds, source) per op."""
    return rows * (84 + 4 * ranks_per_unit + 9 * ops)


def check_step_log(rows: int, ranks_per_unit: int, ops: int, limits: Limits | None = None) -> None:
    """LimitError when a step log growing to `rows` steps would pass `max_step_log_bytes`."""
    lim = limits or current_limits()
    size = step_log_bytes(rows, ranks_per_unit, ops)
    if size > lim.max_step_log_bytes:
        raise over_limit(
            "run.duration_s",
            f"the run's step log would reach {size / 2**30:.2f} GiB ({rows:,} steps of "
            f"{ranks_per_unit} ranks)",
            f"{lim.max_step_log_bytes / 2**30:g} GiB",
            "shorten run.duration_s or cap run.max_requests",
        )


def check_wall(elapsed_s: float, what: str, limits: Limits | None = None) -> None:
    """LimitError when a simulation has run `elapsed_s` wall seconds, past `max_wall_s`."""
    lim = limits or current_limits()
    if elapsed_s > lim.max_wall_s:
        raise over_limit(
            what, f"the simulation has run {elapsed_s:,.0f} s of wall time",
            f"{lim.max_wall_s:,.0f} s",
            "shorten run.duration_s, cap run.max_requests or lower the load",
        )  # fmt: skip


ProgressTick = Callable[[str, float], None]  # (deployment name, fraction simulated)


def wall_watch(show: ProgressTick | None = None) -> ProgressTick:
    """A progress callback that checks the wall-time limit at every engine tick (from now) and
    passes the tick on to `show`: what every front end that runs a scenario hands the engine."""
    started = time.monotonic()

    def tick(name: str, fraction: float) -> None:
        if show is not None:
            show(name, fraction)
        check_wall(time.monotonic() - started, f"deployment {name!r}")

    return tick
