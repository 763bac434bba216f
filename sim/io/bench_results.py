"""Read the result files that serving-benchmark clients write, into one measured summary.

- SGLang `bench_serving --output-file F.jsonl`: one JSON object per run, appended; the last
  line is read (as aiconfigurator's own bench_serving parser does).
- `vllm bench serve --save-result` (`--result-filename F.json`): one JSON object.

Both name the summary figures alike (`mean_ttft_ms`, `mean_tpot_ms`, `output_throughput`,
...); they differ in the E2E name (`mean_e2e_latency_ms` against `mean_e2el_ms`). A file
that lacks a field the comparison needs is refused with the field's name.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

REQUIRED = (
    "completed",
    "duration",
    "output_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "mean_itl_ms",
)
E2E_NAMES = ("mean_e2e_latency_ms", "mean_e2el_ms")  # bench_serving, vllm bench serve


class BenchResultError(ValueError):
    """A result file that cannot be read or lacks a field (the message names it)."""


@dataclass(frozen=True, kw_only=True)
class MeasuredBench:
    """The figures of one measured benchmark run (ms, tokens/s, s)."""

    tool: str  # "sglang bench_serving" | "vllm bench serve"
    figures: dict[str, float]
    num_prompts: int | None
    max_concurrency: int | None


def _constant(name: str) -> float:
    """bench_serving writes request_rate inf as the JSON extension `Infinity`."""
    return {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}[name]


def _last_record(path: Path) -> dict[str, object]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if not lines:
            raise BenchResultError(f"{path}: no JSON line (bench_serving writes one per run)")
        text, where = lines[-1], f"{path}:{len(lines)}"
    else:
        where = str(path)
    try:
        record = json.loads(text, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise BenchResultError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(record, dict):
        raise BenchResultError(f"{where}: expected a JSON object, got {type(record).__name__}")
    return record


def _int_or_none(v: object) -> int | None:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) and v == v else None


def read_bench_result(path: Path) -> MeasuredBench:
    """The measured summary in `path` (.jsonl: bench_serving, .json: vllm bench serve)."""
    if path.suffix not in (".jsonl", ".json"):
        raise BenchResultError(
            f"{path}: expected a bench_serving --output-file (.jsonl) or a vllm bench serve "
            "--save-result file (.json)"
        )
    if not path.is_file():
        raise BenchResultError(f"{path}: no such file")
    record = _last_record(path)
    tool = "sglang bench_serving" if path.suffix == ".jsonl" else "vllm bench serve"
    missing = [k for k in REQUIRED if k not in record]
    e2e = next((k for k in E2E_NAMES if k in record), None)
    if missing:
        raise BenchResultError(
            f"{path}: missing field {missing[0]!r}"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
            + f"; a {tool} result has {', '.join(REQUIRED)}"
        )
    figures: dict[str, float] = {}
    for k in (*REQUIRED, *((e2e,) if e2e else ())):
        v = record[k]
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise BenchResultError(f"{path}: field {k!r} is {v!r}, expected a number")
        figures["mean_e2e_ms" if k == e2e else k] = float(v)
    return MeasuredBench(
        tool=tool,
        figures=figures,
        num_prompts=_int_or_none(record.get("num_prompts")),
        max_concurrency=_int_or_none(record.get("max_concurrency")),
    )
