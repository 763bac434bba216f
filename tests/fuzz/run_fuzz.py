"""`make fuzz`: mutated scenarios, profiles, expressions and trace CSVs through subprocess
workers with a timeout; prints the count of each outcome and exits 1 on any crash, hang, signal
or NaN. Cases are drawn with hypothesis strategies (`strategies.py`) from a fixed seed.

A hang is a case whose worker spends more than `--timeout` seconds of CPU on it (read from
/proc where there is one), or more than `--wall-factor` times that in wall time: on a shared or
niced machine wall time measures the neighbours, CPU time the case.

    python tests/fuzz/run_fuzz.py --scenarios 10000 --profiles 2000 --configs 2000 \
        --expressions 2000 --traces 500
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from strategies import draw_cases  # noqa: E402

BAD = ("crash", "hang", "signal", "nan")


class Worker:
    """One `worker.py` process; restarted after a hang or a death."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("worker.py"))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, text=True, bufsize=1,
        )  # fmt: skip

    def cpu_s(self) -> float | None:
        """The worker's user + system CPU seconds so far, or None without /proc."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def ask(
        self, case: dict[str, Any], timeout_s: float, wall_factor: float = 1.0
    ) -> dict[str, str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        cpu_at_start = self.cpu_s()
        asked = time.monotonic()
        try:
            self.proc.stdin.write(json.dumps(case) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return {"outcome": "signal", "message": f"worker gone ({self.proc.poll()})"}
        while True:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.25)
            if ready:
                break
            wall_s = time.monotonic() - asked
            cpu_now = self.cpu_s()
            cpu_s = wall_s if cpu_now is None or cpu_at_start is None else cpu_now - cpu_at_start
            if cpu_s > timeout_s or wall_s > timeout_s * max(wall_factor, 1.0):
                self.proc.kill()
                return {"outcome": "hang", "message": f"no answer after {cpu_s:.1f} s of CPU, "
                        f"{wall_s:.1f} s of wall (limit {timeout_s:g} s of CPU)"}  # fmt: skip
        line = self.proc.stdout.readline()
        if not line:
            return {"outcome": "signal", "message": f"worker died ({self.proc.wait()})"}
        out: dict[str, str] = json.loads(line)
        return out

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.alive():
            self.proc.kill()
        self.proc.wait()


def run(
    counts: dict[str, int],
    timeout_s: float,
    seed: int,
    show: int,
    save: Path | None = None,
    wall_factor: float = 1.0,
    every: int = 500,
) -> dict[str, Any]:
    tally: dict[str, collections.Counter[str]] = {}
    examples: list[str] = []
    slowest: list[tuple[float, str, str]] = []  # (seconds, kind, outcome) of the slowest cases
    worker = Worker()
    started = time.monotonic()
    try:
        total = sum(counts.values())
        for done, case in enumerate(draw_cases(counts, seed)):
            if done and done % every == 0:  # progress on stderr, flushed: also in a log file
                bad = sum(t[o] for t in tally.values() for o in BAD)
                took_s = time.monotonic() - started
                print(f"fuzz: {done:,} of {total:,} cases, {bad} bad, {took_s:.0f} s",
                      file=sys.stderr, flush=True)  # fmt: skip
            if not worker.alive():
                worker.close()
                worker = Worker()
            asked = time.monotonic()
            res = worker.ask(case, timeout_s, wall_factor)
            slowest.append((time.monotonic() - asked, case["kind"], res["outcome"]))
            slowest = sorted(slowest, reverse=True)[:3]
            tally.setdefault(case["kind"], collections.Counter())[res["outcome"]] += 1
            if res["outcome"] in BAD and len(examples) < show:
                examples.append(f"{case['kind']} {res['outcome']}: {res.get('message', '')}")
            if res["outcome"] in BAD and save is not None:  # the input, to reproduce it alone
                save.mkdir(parents=True, exist_ok=True)
                n = len(list(save.iterdir()))
                (save / f"{n:04d}-{case['kind']}-{res['outcome']}.json").write_text(
                    json.dumps(case)
                )
    finally:
        worker.close()
    return {"tally": tally, "examples": examples, "wall_s": time.monotonic() - started,
            "slowest": slowest}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    defaults = (("scenarios", 1000), ("profiles", 200), ("configs", 200), ("expressions", 200),
                ("traces", 50))  # fmt: skip
    for kind, n in defaults:
        ap.add_argument(f"--{kind}", type=int, default=n)
    ap.add_argument("--timeout", type=float, default=20.0, help="CPU seconds per case (a hang).")
    ap.add_argument("--wall-factor", type=float, default=6.0,
                    help="A case also hangs after this many times --timeout of wall.")  # fmt: skip
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", type=Path, default=None, help="Folder for each bad case's input.")
    args = ap.parse_args(argv)
    counts = {"scenario": args.scenarios, "profile": args.profiles, "config": args.configs,
              "expression": args.expressions, "trace": args.traces}  # fmt: skip
    out = run(
        counts, args.timeout, args.seed, show=20, save=args.save, wall_factor=args.wall_factor
    )
    outcomes = ("result", "user_error", "crash", "hang", "signal", "nan")
    print(f"{'kind':<12}" + "".join(f"{o:>12}" for o in outcomes))
    for kind, tally in out["tally"].items():
        print(f"{kind:<12}" + "".join(f"{tally[o]:>12}" for o in outcomes))
    print(f"wall time {out['wall_s']:.0f} s; slowest cases: " + ", ".join(
        f"{kind} {outcome} {t:.1f} s" for t, kind, outcome in out["slowest"]))  # fmt: skip
    for line in out["examples"]:
        print(line)
    bad = sum(t[o] for t in out["tally"].values() for o in BAD)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
