"""Chrome / Perfetto trace of a run: one track per lock-step unit, one slice per step.

Open the JSON in https://ui.perfetto.dev or chrome://tracing. Processes are deployments, threads
are units (`pool/unit`); each slice's args hold the step's batch and its op breakdown. Long runs
are cut at `max_steps` slices per deployment (the file says so in its metadata).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from sim.engine import SimOutput


def trace_events(outputs: list[SimOutput], max_steps: int = 200_000) -> dict[str, Any]:
    events: list[dict[str, Any]] = []
    truncated: dict[str, int] = {}
    for pid, out in enumerate(outputs):
        name = out.deployment.name
        events.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": name}})
        budget, tid = max_steps, 0
        for pool in out.record.pools:
            log = pool.log
            for u in range(pool.units):
                tid += 1
                events.append(
                    {
                        "ph": "M",
                        "pid": pid,
                        "tid": tid,
                        "name": "thread_name",
                        "args": {"name": f"{pool.name}/unit{u}"},
                    }
                )
                rows = np.flatnonzero(log.column("unit") == u)
                if rows.size > budget:
                    truncated[name] = truncated.get(name, 0) + int(rows.size - budget)
                    rows = rows[:budget]
                budget -= int(rows.size)
                events += _slices(pool.log, rows, pid, tid)
    meta = {"truncated_steps": truncated} if truncated else {}
    return {"traceEvents": events, "displayTimeUnit": "ms", "metadata": meta}


def _slices(log: Any, rows: np.ndarray, pid: int, tid: int) -> list[dict[str, Any]]:
    start, dur = log.column("start_s"), log.column("duration_s")
    seg, dec = log.column("segments"), log.column("decode_reqs")
    pre, imb = log.column("prefill_tokens"), log.column("imbalance")
    ops = log.op_seconds
    batch = log.batch_per_rank
    out = []
    for i in rows.tolist():
        args: dict[str, Any] = {
            "segments": int(seg[i]),
            "decode_reqs": int(dec[i]),
            "prefill_tokens": int(pre[i]),
            "max_batch_per_rank": int(batch[i].max()),
            "rank_imbalance": round(float(imb[i]), 4),
        }
        args.update(
            {
                f"op.{n}_ms": round(float(ops[i, j]) * 1e3, 4)
                for j, n in enumerate(log.op_names)
                if ops[i, j] > 0
            }
        )
        out.append(
            {
                "ph": "X",
                "pid": pid,
                "tid": tid,
                "name": "step" if not pre[i] else "step+prefill",
                "ts": float(start[i]) * 1e6,
                "dur": float(dur[i]) * 1e6,
                "args": args,
            }
        )
    return out


def write_trace(outputs: list[SimOutput], path: str | Path, max_steps: int = 200_000) -> Path:
    p = Path(path)
    p.write_text(json.dumps(trace_events(outputs, max_steps)))
    return p
