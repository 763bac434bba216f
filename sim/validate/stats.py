"""Figures of a validation run: per-group errors, ranking agreement, and the CI gate's check."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from itertools import combinations
from typing import Any

METRICS = ("ttft_ms", "tpot_ms", "tok_s_per_gpu")
GROUP_KEYS = ("gpu", "engine", "mode", "precision")
PAIR_KEYS = ("model", "gpu", "gpus", "isl", "osl", "concurrency")


def rel_err(rec: dict[str, Any], metric: str) -> float:
    """(predicted - measured) / measured, signed."""
    return float(rec[f"pred_{metric}"] / rec[f"meas_{metric}"] - 1.0)


def errors(recs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """MAPE and signed mean error (both in %) of each metric over `recs`, with the count."""
    out: dict[str, Any] = {"count": len(recs)}
    for m in METRICS:
        e = [rel_err(r, m) for r in recs]
        out[f"{m}_mape"] = 100.0 * sum(abs(x) for x in e) / len(e) if e else None
        out[f"{m}_bias"] = 100.0 * sum(e) / len(e) if e else None
    return out


def by_group(recs: Sequence[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in recs:
        groups[tuple(r[k] for k in GROUP_KEYS)].append(r)
    return {k: errors(v) for k, v in sorted(groups.items())}


def pairs(recs: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Rows with the same model, GPU, GPU count, ISL/OSL and concurrency but other layouts."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in recs:
        groups[tuple(r[k] for k in PAIR_KEYS)].append(r)
    out = []
    for k in sorted(groups, key=str):
        for a, b in combinations(sorted(groups[k], key=lambda r: r["id"]), 2):
            if a["layout"] != b["layout"]:  # the same layout on two engines is no layout pair
                out.append((a, b))
    return out


def ranking(recs: Sequence[dict[str, Any]], metric: str) -> dict[str, Any]:
    """Share of pairs the simulator orders as measured by `metric` (ties in the measurement
    left out; a predicted tie does not agree), and the disagreeing pairs, largest measured gap
    first."""
    agree, total, inversions = 0, 0, []
    for a, b in pairs(recs):
        meas = a[f"meas_{metric}"] - b[f"meas_{metric}"]
        pred = a[f"pred_{metric}"] - b[f"pred_{metric}"]
        if meas == 0:
            continue
        total += 1
        if meas * pred > 0:
            agree += 1
        else:
            gap = max(a[f"meas_{metric}"], b[f"meas_{metric}"]) / min(
                a[f"meas_{metric}"], b[f"meas_{metric}"]
            )
            inversions.append((gap, a, b))
    inversions.sort(key=lambda t: -t[0])
    return {
        "pairs": total,
        "agreement": 100.0 * agree / total if total else None,
        "inversions": [(a["id"], b["id"], round(g, 3)) for g, a, b in inversions],
    }


def headline(recs: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """The figures the CI gate holds: TTFT and TPOT MAPE, ranking agreement by TPOT and tok/s."""
    e = errors(recs)
    return {
        "ttft_mape": e["ttft_ms_mape"],
        "tpot_mape": e["tpot_ms_mape"],
        "rank_tpot": ranking(recs, "tpot_ms")["agreement"],
        "rank_tok_s": ranking(recs, "tok_s_per_gpu")["agreement"],
    }


MAPE_SLACK_POINTS = 2.0


def gate(figures: dict[str, float | None], baseline: dict[str, float | None]) -> list[str]:
    """Why `figures` regress from `baseline` (empty when they do not): a TTFT or TPOT MAPE more
    than MAPE_SLACK_POINTS above it, or a ranking agreement below it."""
    fails = []
    for k in ("ttft_mape", "tpot_mape"):
        now, base = figures[k], baseline[k]
        if now is None or (base is not None and now > base + MAPE_SLACK_POINTS):
            fails.append(f"{k} {now} > baseline {base} + {MAPE_SLACK_POINTS} points")
    for k in ("rank_tpot", "rank_tok_s"):
        now, base = figures[k], baseline[k]
        if base is not None and (now is None or now < base - 1e-9):
            fails.append(f"{k} {now} < baseline {base}")
    return fails
