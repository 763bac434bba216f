"""Capacity search: the highest arrival rate each deployment serves within the SLO, and how many
replicas (and GPUs) a target rate then takes.

Per deployment (each in its own copy of the scenario), rates are probed from the workload's own
`rate_req_s`: doubled until one fails (or halved until one meets), then the bracket is narrowed
geometrically until failing / meeting <= 1 + tolerance, within `max_runs` simulations. Each
round's probes, over all deployments, go through one backend call, so they run in parallel.
Every probe simulates the scenario's own `run` (duration, warm-up, seed): same scenario and
options, same answer.

A PD deployment is also sized pool by pool (`sim.search.pd_capacity`): its prefill and decode
pools are searched alone, as more searches in the same rounds, and the report adds prefill and
decode units for the target beside the whole-pair answer.

With a `journal` (`sim.io.journal`), each finished probe is appended as it completes, keyed by
a digest of its own scenario, so a search killed by SIGINT or SIGKILL and run again with the same
arguments re-probes the same rates and finds them on record. A probe that fails on its inputs (a
deployment that does not fit) ends that deployment's search with status 'error' and its message;
the other deployments go on.

Latency need not fall monotonically with load in a finite, seeded run; the search stays on the
safe side: the failing rate is the lowest rate seen to fail, the maximum the highest rate seen to
meet below it.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from sim.io.journal import Journal
from sim.metrics.results import DeploymentResults
from sim.search.backends import ERROR_KEY, Backend
from sim.search.capacity_notes import backlog_limit, missed, near_miss, thin_evidence
from sim.search.capacity_report import CapacityReport, CapacityResult, Probe, Status
from sim.search.pd_capacity import PoolRule, pd_pools_results, pool_rules
from sim.specs.deployment import PdDeployment
from sim.specs.scenario import Scenario, Slo

OPEN_LOOP = ("poisson", "gamma")
MIN_REQUESTS = 20  # below this many arrivals in the window a percentile says little
ProbeFn = Callable[[str, float, bool], None]  # (deployment, rate probed, met the SLO)


class CapacityError(ValueError):
    """A scenario or option the capacity search cannot work with."""


def meets_slo(d: DeploymentResults, rate_req_s: float, slo: Slo) -> bool:
    """Whether a deployment serves `rate_req_s` within the SLO. All three must hold:

    1. `slo_met`: TTFT (over requests that arrived in the window, those still waiting counted
       at least their wait) and TPOT (over those that completed) at the SLO percentile are
       within their targets;
    2. no request was rejected (its KV could never fit a rank);
    3. the backlog is bounded: requests still waiting for admission at the end are no more than
       arrive in one TTFT target (rate x ttft_s). More means the queue is growing: those
       waiting requests would miss the target, though the TTFT percentile counts them only
       by the wait so far.
    """
    backlog_ok = d.requests.queued <= backlog_limit(rate_req_s, slo)
    return d.slo_met and d.requests.rejected == 0 and backlog_ok


def probe_scenario(scenario: Scenario, deployment: str, rate_req_s: float) -> Scenario:
    """The scenario with only `deployment`, at `rate_req_s` (its `expect:` claims dropped: they
    may name the other deployments)."""
    data = scenario.model_dump(mode="json")
    data["deployments"] = [d for d in data["deployments"] if d["name"] == deployment]
    data["workload"]["rate_req_s"] = rate_req_s
    data["expect"] = []
    return Scenario.model_validate(data)


@dataclass
class _Search:
    """The probes of one deployment (or, with a `rule`, one PD pool alone) so far, and which
    rates to try next."""

    name: str
    start: float
    floor: float
    probes: dict[float, Probe] = field(default_factory=dict)
    rule: PoolRule | None = None  # None: the whole deployment, judged by `meets_slo`
    error: tuple[float, str] | None = None  # (rate, message) of a probe that failed its inputs

    def scenario_at(self, scenario: Scenario, rate: float) -> Scenario:
        return (
            self.rule.scenario_at(rate) if self.rule else probe_scenario(scenario, self.name, rate)
        )

    def missed(self, p: Probe, slo: Slo) -> str:
        return self.rule.missed(p) if self.rule else missed(p, slo)

    def bracket(self) -> tuple[float | None, float | None]:
        """(highest meeting rate below `hi`, lowest failing rate `hi`)."""
        hi = min((r for r, p in self.probes.items() if not p.meets_slo), default=None)
        ok = [r for r, p in self.probes.items() if p.meets_slo and (hi is None or r < hi)]
        return max(ok, default=None), hi

    def next_rates(self, width: int, tolerance: float, runs_left: int) -> list[float]:
        lo, hi = self.bracket()
        if self.error is not None:
            rates = []
        elif not self.probes:
            rates = [self.start * 2**i for i in range(width)]
        elif lo is None:
            low = min(self.probes)
            rates = [low / 2 ** (i + 1) for i in range(width) if low / 2 ** (i + 1) >= self.floor]
        elif hi is None:
            rates = [max(self.probes) * 2 ** (i + 1) for i in range(width)]
        elif hi / lo <= 1 + tolerance:
            rates = []
        else:
            rates = [lo * (hi / lo) ** ((i + 1) / (width + 1)) for i in range(width)]
        return rates[: max(runs_left, 0)]


def _probe(rate: float, d: DeploymentResults, slo: Slo, rule: PoolRule | None = None) -> Probe:
    return Probe(
        rate_req_s=rate,
        meets_slo=rule.meets(d, rate) if rule else meets_slo(d, rate, slo),
        slo_met=d.slo_met,
        ttft_s=d.ttft_at_slo_s,
        tpot_s=d.tpot_at_slo_s,
        output_tok_s_per_gpu=d.output_tok_s_per_gpu,
        goodput_req_s=d.goodput_req_s,
        queued=d.requests.queued,
        rejected=d.requests.rejected,
        arrived=d.requests.arrived,
        completed=d.requests.completed,
    )


def _verdict(s: _Search, slo: Slo, tolerance: float) -> tuple[Status, str]:
    lo, hi = s.bracket()
    if s.error is not None:
        rate, message = s.error
        return "error", f"the probe at {rate:.4g} req/s failed: {message}"
    if lo is None:
        low = min(s.probes)
        more = (
            f"fewer than {MIN_REQUESTS} requests would arrive in the window below "
            f"{s.floor:.4g} req/s"
            if low / 2 < s.floor
            else "or allow more runs (--max-runs) to probe lower rates"
        )
        return "fails_at_lowest", (
            f"misses the SLO at every rate probed, down to {low:.4g} req/s "
            f"({s.missed(s.probes[low], slo)}): relax the SLO or change the deployment; {more}"
        )
    if hi is None:
        return "no_failure", (
            f"meets the SLO at every rate probed, up to {lo:.4g} req/s: the maximum is at least "
            "that (allow more runs, --max-runs, to probe higher)"
        )
    if hi / lo <= 1 + tolerance:
        return "converged", f"meets the SLO at {lo:.4g} req/s, misses it at {hi:.4g}"
    return "max_runs", (
        f"max runs reached before the tolerance: meets at {lo:.4g} req/s, misses at {hi:.4g} "
        f"({hi / lo - 1:.0%} apart; allow more runs, --max-runs)"
    )


def _near_miss(s: _Search, slo: Slo) -> str | None:
    if not s.probes:
        return None
    ttft_target_s = s.rule.ttft_budget_s if s.rule is not None else slo.ttft_s
    return near_miss(s.probes[min(s.probes)], slo, ttft_target_s)


def _result(s: _Search, gpus: int, target: float, slo: Slo, tolerance: float) -> CapacityResult:
    status, note = _verdict(s, slo, tolerance)
    lo, hi = s.bracket()
    at = s.probes[lo] if lo is not None else None
    if at is not None and (caution := thin_evidence(at)):
        note += f"; {caution}"
    replicas = math.ceil(target / lo) if lo is not None else None
    return CapacityResult(
        deployment=s.name,
        gpus_per_deployment=gpus,
        status=status,
        note=note,
        max_rate_req_s=lo,
        failing_rate_req_s=hi,
        output_tok_s_per_gpu=at.output_tok_s_per_gpu if at else None,
        ttft_s=at.ttft_s if at else None,
        tpot_s=at.tpot_s if at else None,
        replicas=replicas,
        gpus=replicas * gpus if replicas is not None else None,
        runs=len(s.probes),
        probes=[s.probes[r] for r in sorted(s.probes)],
        warnings=[w for w in (_near_miss(s, slo),) if w is not None],
    )


def check_options(
    scenario: Scenario, target_rate_req_s: float, tolerance: float, max_runs: int, width: int
) -> None:
    """CapacityError naming the option or workload field that the search cannot use."""
    kind = scenario.workload.kind
    if kind not in OPEN_LOOP:
        raise CapacityError(
            f"workload.kind={kind!r}: capacity search needs an open-loop workload "
            f"({' or '.join(OPEN_LOOP)}) whose rate_req_s it can vary; for closed-loop or trace "
            "workloads use `mlasim sweep` over their load"
        )
    if not target_rate_req_s > 0:
        raise CapacityError(f"target rate {target_rate_req_s}: give a rate > 0 req/s")
    if not 0.001 <= tolerance < 1:
        raise CapacityError(f"tolerance {tolerance}: give a relative tolerance in [0.001, 1)")
    if max_runs < 2:
        raise CapacityError(f"max runs {max_runs}: give at least 2 (one meeting, one failing)")
    if width < 1:
        raise CapacityError(f"probes per round {width}: give at least 1")


def search_count(scenario: Scenario, pd_pools: bool = True) -> int:
    """Searches a capacity search runs (each at most `max_runs` simulations): one per
    deployment, plus one per pool of each PD deployment with `pd_pools`."""
    pairs = sum(isinstance(d, PdDeployment) for d in scenario.deployments)
    return len(scenario.deployments) + (2 * pairs if pd_pools else 0)


def probe_id(search: str, job: Scenario) -> str:
    """A probe's journal id: a digest of the search's name and the probe's whole scenario."""
    return hashlib.sha256(f"{search}\n{job.model_dump_json()}".encode()).hexdigest()[:24]


def _record(todo: tuple[_Search, float], rec: dict[str, object], on_probe: ProbeFn | None) -> None:
    """Put one journal record (a probe or an error) into its search."""
    s, rate = todo
    if ERROR_KEY in rec:
        s.error = (rate, str(rec[ERROR_KEY]))
        return
    s.probes[rate] = Probe.model_validate(rec["probe"])
    if on_probe is not None:
        on_probe(s.name, rate, s.probes[rate].meets_slo)


def capacity_search(
    scenario: Scenario,
    target_rate_req_s: float,
    backend: Backend,
    *,
    tolerance: float = 0.05,
    max_runs: int = 20,
    probes_per_round: int = 1,
    on_probe: ProbeFn | None = None,
    pd_pools: bool = True,
    journal: Journal | None = None,
) -> CapacityReport:
    """Per deployment: highest rate meeting the SLO (`meets_slo`), replicas and GPUs for the
    target. With `pd_pools`, each PD deployment's pools are also searched alone
    (`sim.search.pd_capacity`; `on_probe` names them `<pair>.<pool>`). `max_runs` bounds each
    search's simulations; `journal` records each probe and skips those already in it. A probe
    that fails on its inputs ends its search with status 'error'. Raises CapacityError for a
    closed-loop or trace workload or a bad option."""
    check_options(scenario, target_rate_req_s, tolerance, max_runs, probes_per_round)
    start = float(scenario.workload.rate_req_s)  # type: ignore[union-attr]
    run = scenario.run
    window = (run.duration_s - run.warmup_s) if run.duration_s is not None else None
    floor = MIN_REQUESTS / window if window else 0.0
    searches = [_Search(d.name, start, floor) for d in scenario.deployments]
    rules = pool_rules(scenario) if pd_pools else []
    searches += [_Search(r.label, start, floor, rule=r) for r in rules if r.possible]
    while True:
        todo = [
            (s, r)
            for s in searches
            for r in s.next_rates(probes_per_round, tolerance, max_runs - len(s.probes))
        ]
        if not todo:
            break
        jobs = [s.scenario_at(scenario, r) for s, r in todo]
        ids = [probe_id(s.name, job) for (s, _), job in zip(todo, jobs, strict=True)]
        for i, pid in enumerate(ids):
            if journal is not None and pid in journal:
                _record(todo[i], journal.done[pid], on_probe)
        fresh = [i for i, pid in enumerate(ids) if journal is None or pid not in journal]
        for j, results in backend.run([jobs[i] for i in fresh], keep_going=True):
            k = fresh[j]
            s, rate = todo[k]
            if ERROR_KEY in results:
                rec: dict[str, object] = {"id": ids[k], ERROR_KEY: results[ERROR_KEY]}
            else:
                d = DeploymentResults.model_validate(results["deployments"][0])
                rec = {
                    "id": ids[k],
                    "probe": _probe(rate, d, scenario.slo, s.rule).model_dump(mode="json"),
                }
            if journal is not None:
                journal.append(rec)
            _record(todo[k], rec, on_probe)
    gpus = {d.name: d.total_gpus for d in scenario.deployments}
    slo = scenario.slo
    pools = {r.label: r.impossible() for r in rules if not r.possible}
    for s in searches:
        if s.rule is not None:
            pools[s.name] = _result(s, s.rule.unit.total_gpus, target_rate_req_s, slo, tolerance)
    return CapacityReport(
        scenario=scenario.name,
        target_rate_req_s=target_rate_req_s,
        slo=scenario.slo,
        tolerance=tolerance,
        max_runs=max_runs,
        duration_s=run.duration_s,
        deployments=[
            _result(s, gpus[s.name], target_rate_req_s, slo, tolerance)
            for s in searches
            if s.rule is None
        ],
        pd_pools=pd_pools_results(rules, pools),
    )
