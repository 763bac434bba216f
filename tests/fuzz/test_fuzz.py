"""A bounded fuzz inside `make test`: hypothesis draws mutated inputs and each ends in a result
or a one-line error, run in a subprocess worker with a timeout (`make fuzz` runs many more)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_fuzz import BAD, Worker
from strategies import MUTATORS

WORKER: list[Worker] = []


def _ask(kind: str, rng: random.Random) -> dict[str, str]:
    if not WORKER or not WORKER[0].alive():
        WORKER[:] = [Worker()]
    return WORKER[0].ask({"kind": kind, "text": MUTATORS[kind](rng)}, timeout_s=20)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(kind=st.sampled_from(sorted(MUTATORS)), rng=st.randoms(use_true_random=False))
def test_every_case_ends_in_a_result_or_a_one_line_error(kind: str, rng: random.Random) -> None:
    res = _ask(kind, rng)
    assert res["outcome"] not in BAD, res
    if res["outcome"] == "user_error":
        assert "Traceback" not in res["message"] and res["message"].strip()
