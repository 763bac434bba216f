"""Start-up time of the `mlasim` command (target: 0.3 s wall for `--help` and `models`).

Each command runs as its own process, as a shell runs it (`python -c "from sim.cli.commands import
main; main()"`, what the console script does), best of five; CPU time is the child's user +
system time. A busy machine inflates the wall time: read the CPU time beside it.

    python bench/bench_cli.py
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

COMMANDS = (["--help"], ["models"])
RUNS = 5
TARGET_S = 0.3


def _once(args: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one `mlasim ARGS` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "from sim.cli.commands import main; main()", *args],
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "100"},
    )
    wall = time.perf_counter() - w0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    for args in COMMANDS:
        runs = [_once(args) for _ in range(RUNS)]
        wall = min(w for w, _ in runs)
        cpu = min(c for _, c in runs)
        verdict = "ok" if wall < TARGET_S else "over"
        print(
            f"mlasim {' '.join(args):8} {wall:.3f} s wall, {cpu:.3f} s CPU, best of {RUNS} "
            f"(target {TARGET_S} s wall: {verdict})"
        )


if __name__ == "__main__":
    main()
