"""Turn one deployment's `RunRecord` (request columns, per-pool step logs and facts) into
`DeploymentResults`.

Window: simulated time [warmup_s, end_s]. Throughput counts tokens emitted by steps that ended in
the window; latencies use requests that arrived in the window: TTFT those that got a first token,
with the ones still waiting at the end as lower bounds (Kaplan-Meier percentiles,
`sim.metrics.stats.censored_quantile`); E2E those that completed, with the unfinished ones as lower
bounds; TPOT those that completed. ITL is the duration of each decode step weighted by the requests
it delivered tokens to (steps run back to back, so a request's gap between deliveries is the step it
was in).
"""

from __future__ import annotations

import numpy as np

from sim.cost.overheads import overlap_row
from sim.cost.rate import LAUNCH_ROW
from sim.engine import Phase, PoolRecord, RunRecord
from sim.metrics.benchmark import summarize_benchmark
from sim.metrics.requests import BoolArray, RequestLatencies, request_latencies, token_gaps
from sim.metrics.results import FROM_MAIN_POOL, DeploymentResults, PoolResults, RequestCountsOut
from sim.metrics.stats import (
    batch_rates,
    censored_percentiles,
    censored_quantile,
    percentiles,
    quantile,
    rates_ci95,
    weighted_percentiles,
)
from sim.specs.deployment import PdDeployment
from sim.specs.scenario import Slo


def _busy(start: np.ndarray, dur: np.ndarray, lo: float, hi: float) -> float:
    """Step time inside [lo, hi]: a step that straddles an edge counts its part inside."""
    inside = np.minimum(start + dur, hi) - np.maximum(start, lo)
    return float(np.clip(inside, 0.0, None).sum())


def _per(x: float | None, n: float) -> float | None:
    return None if x is None else x / n


def _mean(x: np.ndarray) -> float | None:
    return float(x.mean()) if x.size else None


def summarize_pool(run: RunRecord, pool: PoolRecord) -> PoolResults:
    log, d = pool.log, pool.deployment
    start, dur = log.column("start_s"), log.column("duration_s")
    w = (start + dur) >= run.warmup_s
    window = max(run.end_s - run.warmup_s, 1e-12)
    R = pool.ranks_per_unit
    steps = int(w.sum())
    ops = log.op_seconds[w]
    breakdown = {n: float(ops[:, j].mean()) for j, n in enumerate(log.op_names)} if steps else {}
    dec = log.column("decode_reqs")[w].astype(np.float64)
    acc = log.column("accept_tokens")[w]
    kv_cap = pool.kv_capacity_pages * R
    mem = pool.memory
    overlap = overlap_row(d)
    return PoolResults(
        name=pool.name,
        role=pool.role,
        gpus=d.total_gpus,
        units=pool.units,
        ranks_per_unit=R,
        steps=steps,
        step_time_s=_mean(dur[w]),
        busy_fraction=_busy(start, dur, run.warmup_s, run.end_s) / (window * pool.units),
        batch_per_rank=_mean(log.column("segments")[w] / R),
        decode_batch_per_rank=_mean(dec / R),
        prefill_tokens_per_step=_mean(log.column("prefill_tokens")[w].astype(np.float64)),
        dp_imbalance=_mean(log.column("imbalance")[w]),
        kv_utilisation=_mean(log.column("kv_pages")[w] / kv_cap) if kv_cap else None,
        kv_utilisation_peak=pool.kv_peak_pages / max(pool.kv_capacity_pages, 1),
        kv_capacity_tokens_per_rank=pool.kv_capacity_pages * pool.kv_page_tokens,
        step_breakdown_s=breakdown,
        step_sources={n: log.op_source(n) for n in log.op_names},
        extrapolated_ops=sorted(n for n, x in log.op_extrapolated.items() if x),
        overlap_saved_s=_mean(log.column("overlap_saved_s")[w]),
        overlap_row=None if overlap is None else overlap[0],
        overlap_source=None if overlap is None else overlap[1],
        launch_source=pool.launch_source if LAUNCH_ROW in breakdown else None,
        mtp_accept_len=float(acc.sum() / dec.sum()) if dec.sum() else None,
        preemptions=pool.preempted,
        kv_dup_factor=mem.kv_dup_factor,
        kv_bytes_per_token_per_gpu=mem.kv_bytes_per_token_per_gpu,
        kv_capacity_tokens_per_gpu=mem.kv_capacity_tokens_per_gpu,
    )


def _itl(run: RunRecord) -> tuple[np.ndarray, np.ndarray]:
    """Token gaps, weighted, of the steps that end after the warm-up."""
    return token_gaps(run, lambda start, dur: start + dur >= run.warmup_s)


def _counts(run: RunRecord, mine: np.ndarray) -> RequestCountsOut:
    ph = np.bincount(run.requests.phase[mine], minlength=len(Phase))
    return RequestCountsOut(
        arrived=int(mine.sum()),
        completed=int(ph[Phase.DONE]),
        running=int(ph[Phase.PREFILL] + ph[Phase.DECODE] + ph[Phase.TRANSFER]),
        queued=int(ph[Phase.QUEUED]),
        rejected=int(ph[Phase.REJECTED]),
    )


def _slo_outcomes(run: RunRecord, lat: RequestLatencies, slo: Slo) -> tuple[BoolArray, BoolArray]:
    """Per request: met the SLO (finished within both targets; a one-token output has no TPOT,
    so only its TTFT counts), and failed it already (finished outside a target, rejected, a
    first token later than the TTFT target, or none yet and older than it at the end)."""
    t = run.requests
    tpot = np.nan_to_num(lat.tpot_s, nan=0.0)
    in_time = lat.ttft_s <= slo.ttft_s  # NaN (no first token yet) compares False
    met = lat.done & in_time & (tpot <= slo.tpot_s)
    rejected = t.phase == Phase.REJECTED
    waiting_too_long = np.isnan(lat.ttft_s) & (run.end_s - t.arrival_s > slo.ttft_s)
    late = ~np.isnan(lat.ttft_s) & ~in_time
    failed = (lat.done & ~met) | rejected | waiting_too_long | late
    return met, failed & ~met


def _attainment(met: BoolArray, failed: BoolArray, after_warmup: BoolArray) -> float | None:
    """Share of the decided requests that arrived after the warm-up which met the SLO; requests
    still in flight within both targets are undecided and left out."""
    decided = (met | failed) & after_warmup
    return float(met[decided].mean()) if decided.any() else None


def _slo_met(ttft_q: float | None, tpot_q: float | None, completed: bool, slo: Slo) -> bool:
    """TTFT and TPOT at the SLO percentile within their targets. TTFT needs a value (None:
    no first token, or a percentile beyond every one seen); TPOT may lack one only where
    requests completed and every one had a single output token (no TPOT to miss)."""
    ttft_ok = ttft_q is not None and ttft_q <= slo.ttft_s
    tpot_ok = tpot_q <= slo.tpot_s if tpot_q is not None else completed
    return ttft_ok and tpot_ok


def summarize(run: RunRecord, slo: Slo) -> DeploymentResults:
    """One deployment's figures from its run record."""
    t = run.requests
    lo, hi = run.warmup_s, run.end_s
    window = max(hi - lo, 1e-12)
    first, finish, in_len = t.first_token_s, t.finish_s, t.input_tokens
    lat = request_latencies(run)
    samples = lat.samples()
    ttft, tpot, e2e = samples["TTFT"], samples["TPOT"], samples["E2E"]
    met, failed = _slo_outcomes(run, lat, slo)
    finished_in_window = lat.done & (finish >= lo)
    emitted = 0
    step_ends, step_tokens = [], []
    for pool in run.pools:
        log = pool.log
        ends = log.column("start_s") + log.column("duration_s")
        tokens = log.column("output_tokens")
        emitted += int(tokens[ends >= lo].sum())
        step_ends.append(ends)
        step_tokens.append(tokens.astype(np.float64))
    rates = batch_rates(np.concatenate(step_ends), np.concatenate(step_tokens), lo, hi)
    prefilled = (first >= lo) & (first <= hi)
    input_tok_s = float(in_len[prefilled].sum()) / window
    counts = _counts(run, lat.after_warmup)
    pools = [summarize_pool(run, p) for p in run.pools]
    main = pools[-1]  # decode pool of a PD pair; the only pool otherwise
    gpus = sum(p.deployment.total_gpus for p in run.pools)
    nodes = sum(p.deployment.total_gpus / p.deployment.gpus_per_node for p in run.pools)
    waited = lat.ttft_censored()
    ttft_q = censored_quantile(ttft, waited, slo.percentile)
    tpot_q = quantile(tpot, slo.percentile)
    output_tok_s = emitted / window
    return DeploymentResults(
        name=run.deployment.name,
        kind="pd" if isinstance(run.deployment, PdDeployment) else "unit",
        gpus=gpus,
        nodes=nodes,
        output_tok_s=output_tok_s,
        output_tok_s_per_gpu=output_tok_s / gpus,
        output_tok_s_per_gpu_ci95=_per(rates_ci95(rates), gpus),
        output_tok_s_per_gpu_batches=None if rates is None else (rates / gpus).tolist(),
        output_tok_s_per_node=output_tok_s / nodes,
        input_tok_s=input_tok_s,
        input_tok_s_per_gpu=input_tok_s / gpus,
        input_tok_s_per_node=input_tok_s / nodes,
        request_throughput_req_s=int(((finish >= lo) & lat.done).sum()) / window,
        ttft_s=censored_percentiles(ttft, waited),
        tpot_s=percentiles(tpot),
        itl_s=weighted_percentiles(*_itl(run)),
        e2e_s=censored_percentiles(e2e, lat.e2e_censored()),
        goodput_req_s=int((met & finished_in_window).sum()) / window,
        slo_attainment=_attainment(met, failed, lat.after_warmup),
        slo_met=_slo_met(ttft_q, tpot_q, bool(lat.measured.any()), slo),
        ttft_at_slo_s=ttft_q,
        tpot_at_slo_s=tpot_q,
        requests=counts,
        kv_capacity_tokens_total=main.kv_capacity_tokens_per_rank
        * main.ranks_per_unit
        * main.units,
        **{k: getattr(main, k) for k in FROM_MAIN_POOL},
        preemptions=int(t.preemptions[lat.after_warmup].sum()),
        kv_transfer_s_mean=run.kv_transfer_total_s / run.kv_transfers if run.kv_transfers else None,
        pools=pools,
        profile=run.profile,
        window_s=window,
        sim_events=run.events,
        benchmark=summarize_benchmark(run),
    )
