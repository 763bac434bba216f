"""Instructions a benchmark's parts execute, counted by valgrind's callgrind.

CPU time on a shared machine moves by 20-30% between runs of the same code, more than most
single optimisations gain. The instructions a run executes barely move (a few parts in ten
thousand between runs: hash seeds are fixed, the allocator's paths vary a little), so two
versions compare in one run each, whatever the machine's load. Callgrind runs the program
about 50 times slower: a bench offers it as an option, never by default.

A benchmark runs its timed parts in a child process under callgrind, calling `mark()` before
each part and once after the last. Callgrind dumps its counters each time `mark`'s C function
(`os.getppid`, which the simulator never calls) is entered: dump k + 1 holds part k. A child
counted from a late point (`count(..., from_start=False)`) runs uninstrumented, about ten times
faster than instrumented, until it calls `instrument(True)` before its first mark; what it
counts between two marks is the same either way.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_MARK_FUNCTION = "os_getppid"  # CPython's C function behind os.getppid
_TOTAL = re.compile(r"^(?:summary|totals):\s+(\d+)", re.MULTILINE)


def available() -> bool:
    """Whether valgrind is installed."""
    return shutil.which("valgrind") is not None


def mark() -> None:
    """Where callgrind dumps its counters: call before each part and after the last."""
    os.getppid()


class Window:
    """One part's two marks, run uninstrumented outside them (under `count(..., from_start=
    False)`): instrumentation on, then the first mark; the second mark, then instrumentation
    off. A new one per part."""

    def __init__(self) -> None:
        self.made = 0

    def __call__(self) -> None:
        if self.made == 0:
            instrument(True)
        mark()
        if self.made == 1:
            instrument(False)
        self.made += 1


def instrument(on: bool) -> None:
    """Turn callgrind's instrumentation of this process on or off (`callgrind_control`, which
    returns once callgrind has taken the command); RuntimeError where it cannot."""
    cmd = ["callgrind_control", "-i", "on" if on else "off", str(os.getpid())]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr[-500:]}")


def count(argv: list[str], parts: int, from_start: bool = True) -> list[int]:
    """Instructions of each of the `parts` parts that `python argv...` marks (`mark`), run
    under callgrind; RuntimeError when it fails or marks fewer parts. Without `from_start`,
    the child starts uninstrumented and must call `instrument(True)` before its first mark."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        late = [] if from_start else ["--instr-atstart=no"]
        cmd = [
            "valgrind", "--tool=callgrind", *late, f"--dump-before={_MARK_FUNCTION}",
            f"--callgrind-out-file={out}", sys.executable, *argv,
        ]  # fmt: skip
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"callgrind run failed ({done.returncode}): {done.stderr[-2000:]}")
        counts = []
        for k in range(parts):
            dump = Path(f"{out}.{k + 2}")  # dump 1: start-up, before the first mark
            found = _TOTAL.search(dump.read_text()) if dump.exists() else None
            if found is None:
                raise RuntimeError(
                    f"callgrind wrote no counters for part {k + 1} of {parts} ({dump.name}): "
                    f"does this Python's os.getppid run through {_MARK_FUNCTION}?"
                )
            counts.append(int(found.group(1)))
        return counts
