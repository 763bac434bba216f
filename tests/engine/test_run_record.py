"""The run record: plain, read-only data that the metrics read instead of engine objects."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from sim.engine import RunRecord
from sim.metrics import summarize
from sim.metrics.results import FROM_MAIN_POOL, DeploymentResults, PoolResults
from sim.specs.deployment import Deployment, PdDeployment
from sim.specs.scenario import Slo
from tests.builders import pd_pair, unit
from tests.engine.fixed_cost import FixedCost, requests, run_trace

METRICS = Path(__file__).resolve().parents[2] / "sim" / "metrics"
# what the metrics may take from the engine: the record's types, the phase codes, and one pure
# function of the workload spec (no pool, unit, feed, table or cost model)
ALLOWED = {
    "sim.engine": {"Phase", "PoolRecord", "RunRecord"},
    "sim.engine.arrivals": {"share_longer_than"},
}


def _run(dep: Deployment | PdDeployment) -> RunRecord:
    batch = requests(*((0.01 * i, 64, 8) for i in range(20)))
    return run_trace(dep, FixedCost(step_s=0.01, prefill_token_s=1e-5), batch).record


def test_metrics_import_only_the_record_from_the_engine() -> None:
    for path in sorted(METRICS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sim.engine"):
                allowed = ALLOWED.get(node.module or "", set())
                names = {a.name for a in node.names}
                assert names <= allowed, f"{path.name} imports {names - allowed} from {node.module}"


def test_record_columns_are_read_only_and_trimmed() -> None:
    rec = _run(unit(ranks=2))
    t = rec.requests
    assert t.size == rec.counts.arrived > 0
    for name in ("phase", "arrival_s", "finish_s", "output_tokens", "rank"):
        col = getattr(t, name)
        assert col.shape == (t.size,)
        with pytest.raises(ValueError, match="read-only"):
            col[0] = 0
    (pool,) = rec.pools
    assert pool.role == "colocated" and pool.units == 1 and pool.ranks_per_unit == 2
    assert pool.log.n > 0 and pool.kv_peak_pages <= pool.kv_capacity_pages
    assert rec.profile == "custom cost model"  # a fixed-cost model has no profile
    assert pool.memory.kv_dup_factor is None  # ... nor a memory plan
    assert rec.benchmark is None and rec.kv_transfers == 0


def test_pd_record_names_the_pools_by_role_and_counts_transfers() -> None:
    one = {"nodes": 1, "gpus_per_node": 1}
    pd = pd_pair(**one)
    rec = _run(pd)
    assert [p.role for p in rec.pools] == ["prefill", "decode"]
    assert rec.kv_transfers > 0 and rec.kv_transfer_total_s >= 0.0
    res = summarize(rec, Slo(ttft_s=1.0, tpot_s=1.0))
    assert res.kv_transfer_s_mean == pytest.approx(rec.kv_transfer_total_s / rec.kv_transfers)


def test_main_pool_figures_are_the_same_fields_in_both_classes() -> None:
    dep, pool = DeploymentResults.model_fields, PoolResults.model_fields
    for name in FROM_MAIN_POOL:
        assert dep[name].annotation == pool[name].annotation, name
    res = summarize(_run(unit()), Slo(ttft_s=1.0, tpot_s=1.0))
    (main,) = res.pools
    for name in FROM_MAIN_POOL:
        assert getattr(res, name) == getattr(main, name), name
    assert np.isfinite(res.step_time_s or np.nan)
