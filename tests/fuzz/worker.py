"""Fuzz worker: reads one JSON case per line on stdin, writes one JSON outcome per line.

Outcomes: 'result' (accepted, and a run's results JSON holds no NaN/inf), 'user_error' (a
ValueError: the one-line error a user sees), 'crash' (any other exception, with its type),
'nan' (a result holding NaN or inf). The parent (`run_fuzz.py`) adds 'hang' (no answer within
the timeout) and 'signal' (the worker died).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

MAX_RUN_S = 5.0  # a valid scenario is simulated this long at most (the fuzz checks inputs)


def _scenario(text: str) -> str:
    from sim.io.results_io import results_dict
    from sim.io.scenario_io import parse_scenario
    from sim.run import run_scenario

    sc = parse_scenario(text, "fuzz.yaml")
    run = sc.run.model_copy(
        update={"duration_s": min(sc.run.duration_s or MAX_RUN_S, MAX_RUN_S), "warmup_s": 0.0}
    )
    sc = sc.model_copy(update={"run": run})
    data = results_dict(run_scenario(sc))
    json.dumps(data, allow_nan=False)  # ValueError here would be 'nan': checked below
    return "result"


def _profile(text: str) -> str:
    from sim.catalog.profiles import load_profile

    with tempfile.TemporaryDirectory() as d:  # through the file loader, as a user's profile
        p = Path(d) / "fuzz.json"
        p.write_text(text)
        load_profile.__wrapped__(str(p))
    return "result"


# a small deployment of the mutated config, simulated briefly: loading alone would not show a
# config that loads but prices a step at NaN or sizes memory at nonsense
CONFIG_SCENARIO = """\
name: fuzz_config
model: {path}
gpu: h200
deployments:
- {{name: tp8, attn_tp: 8, moe_tp: 8}}
workload:
  kind: closed
  concurrency: 8
  input: {{kind: fixed, tokens: 512}}
  output: {{kind: fixed, tokens: 32}}
slo: {{ttft_s: 10.0, tpot_s: 0.1}}
run: {{duration_s: 2.0, warmup_s: 0.0, seed: 1}}
"""


def _config(text: str) -> str:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "config.json"
        path.write_text(text)
        return _scenario(CONFIG_SCENARIO.format(path=path))


def _trace(text: str) -> str:
    from sim.io.workload_csv import read_trace

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.csv"
        p.write_bytes(text.encode("utf-8", "surrogateescape"))
        read_trace(p)
    return "result"


def _expression(text: str) -> str:
    from sim.checks.expect import parse

    parse(text)
    return "result"


KINDS = {"scenario": _scenario, "profile": _profile, "config": _config, "trace": _trace,
         "expression": _expression}  # fmt: skip


def handle(case: dict[str, Any]) -> dict[str, str]:
    try:
        return {"outcome": KINDS[case["kind"]](case["text"])}
    except ValueError as exc:
        message = str(exc)
        if "Out of range float values are not JSON compliant" in message:
            return {"outcome": "nan", "message": message}
        if "Traceback" in message:
            return {"outcome": "crash", "message": message[:500]}
        return {"outcome": "user_error", "message": message[:300]}
    except Exception as exc:
        return {"outcome": "crash", "message": f"{type(exc).__name__}: {str(exc)[:300]}"}


def main() -> None:
    for line in sys.stdin:
        print(json.dumps(handle(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
