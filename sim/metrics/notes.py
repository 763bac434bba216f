"""Notes on a run's figures, what a reader should know: `mlasim run` prints them under its
tables and the app shows them above its cards.

Each note is None when it does not apply. They say when a figure rests on little (no request in
the window, most requests unfinished, a noisy window, users moving in step), when the load
exceeds what a deployment serves, when a time was extrapolated or measured on a CPU, why
requests were rejected, and what the breakdown's launch row holds.
"""

from __future__ import annotations

from sim.catalog import load_model
from sim.cost.rate import LAUNCH_ROW
from sim.engine.arrivals import share_longer_than
from sim.metrics.results import Results, few_finished
from sim.specs.model import ModelSpec
from sim.specs.profile import Profile
from sim.specs.scenario import Scenario
from sim.specs.workload import ClosedWorkload, FixedLength, TraceWorkload

# A mark, not the word, in each cell: most ops of a cross-GPU profile are extrapolated and the
# full word would wrap every cell of an 80-column terminal.
EXTRAPOLATED_MARK = "*"
EXTRAPOLATED_NOTE = (
    f"{EXTRAPOLATED_MARK} extrapolated: outside a measured grid, or from a table measured on "
    "another GPU; the time is that table's efficiency scaled by this GPU's roofline."
)
LOCKSTEP_NOTE = (
    "users start together and their lengths are fixed, so they move in step (all prefilling, "
    "then all decoding): set workload.ramp_s or vary the lengths for a steady mix"
)
NOISY_SHARE = 0.1  # a 95% interval wider than this share of the throughput gets a warning


def extrapolated_note(results: Results) -> str | None:
    """The footnote for the breakdown table's mark, or None when no op was extrapolated."""
    return EXTRAPOLATED_NOTE if any(d.extrapolated_ops for d in results.deployments) else None


def launch_note(results: Results) -> str | None:
    """What the breakdown's launch row holds and at what figure, where a deployment has one."""
    figures = sorted({
        d.launch_source.split(":", 1)[0]
        for d in results.deployments
        if d.launch_source and LAUNCH_ROW in d.step_breakdown_s
    })  # fmt: skip
    if not figures:
        return None
    return (
        f"{LAUNCH_ROW}: the launches of the kernels no table times (priced by the roofline), "
        f"at {' / '.join(figures)}, taken out of their ops' rows; a table's kernels keep "
        "theirs inside their measured time (results: launch_source)"
    )


def lockstep_note(sc: Scenario) -> str | None:
    """A warning when a closed loop's users will move in step, None otherwise."""
    w = sc.workload
    if not isinstance(w, ClosedWorkload) or w.ramp_s > 0:
        return None
    fixed = isinstance(w.input, FixedLength) and isinstance(w.output, FixedLength)
    return LOCKSTEP_NOTE if fixed else None


def noisy_note(results: Results) -> str | None:
    """A warning naming the deployments whose throughput moves much across the window."""
    noisy = [
        f"{d.name} ±{100 * d.output_tok_s_per_gpu_ci95 / d.output_tok_s_per_gpu:.0f}%"
        for d in results.deployments
        if d.output_tok_s_per_gpu_ci95 is not None
        and d.output_tok_s_per_gpu > 0
        and d.output_tok_s_per_gpu_ci95 > NOISY_SHARE * d.output_tok_s_per_gpu
    ]
    if not noisy:
        return None
    return (
        f"throughput moves across the window ({', '.join(noisy)}: 95% interval from ten batch "
        "means): lengthen run.duration_s, or check whether the load moves in waves"
    )


def overloaded(arrived: int, queued: int) -> bool:
    """A third or more of the window's requests still wait for their first token at the end:
    the deployment is offered more than it serves, and a longer run only lengthens the queue."""
    return arrived > 0 and 3 * queued >= arrived


def overload_note(results: Results, open_loop: bool = True) -> str | None:
    """A warning naming the deployments whose queue outlasts the window (`overloaded`). Only
    for open-loop and trace arrivals: a closed loop's queue is bounded by its users, so there a
    longer run does settle it (`unfinished_note` says so)."""
    if not open_loop:
        return None
    over = [
        f"{d.name} {d.requests.queued:,} of {d.requests.arrived:,}"
        for d in results.deployments
        if overloaded(d.requests.arrived, d.requests.queued)
    ]
    if not over:
        return None
    return (
        f"more load than served: requests still waiting for a first token at the end "
        f"({', '.join(over)}); TTFT and E2E count them as lower bounds. A longer run only "
        "lengthens the queue: lower the load or add GPUs"
    )


def unfinished_note(results: Results, open_loop: bool = True) -> str | None:
    """A warning when few requests that arrived in the window finished (`few_finished`), and,
    under open-loop arrivals, not because they are queued (`overload_note`): TPOT (and the SLO
    verdict) then rest on the ones that did, the earliest or shortest."""
    few = [
        f"{d.name} {d.requests.completed:,} of {d.requests.arrived:,}"
        for d in results.deployments
        if few_finished(d.requests.arrived, d.requests.completed)
        and not (open_loop and overloaded(d.requests.arrived, d.requests.queued))
    ]
    if not few:
        return None
    return (
        f"few requests that arrived in the window finished ({', '.join(few)}): "
        "TPOT and the SLO verdict rest on those that did (the earliest or shortest); TTFT and E2E "
        "count the rest as lower bounds. Lengthen run.duration_s"
    )


def empty_note(results: Results) -> str | None:
    """A warning naming the deployments to which no request arrived after the warm-up."""
    empty = [d.name for d in results.deployments if d.requests.arrived == 0]
    if not empty:
        return None
    return (
        f"no request arrived after the warm-up ({', '.join(empty)}): every figure is empty. "
        "Check that the arrivals reach past the warm-up (run.warmup_s 0 shows the whole run)"
    )


def rejected_note(results: Results) -> str | None:
    """Why requests were rejected, where some were."""
    rejected = [
        f"{d.name} {d.requests.rejected:,} (KV per rank: {d.kv_capacity_tokens_per_rank:,} tokens)"
        for d in results.deployments
        if d.requests.rejected
    ]
    if not rejected:
        return None
    return (
        f"requests rejected on arrival ({', '.join(rejected)}): a prompt and its answer could "
        "never fit one attention rank's KV cache. Shorten the requests, or use fewer GPUs per "
        "attention rank (attn_tp), FP8 KV (kv_dtype: fp8) or more memory per GPU"
    )


def context_note(sc: Scenario, context_tokens: int) -> str | None:
    """A warning when the workload's unbounded lengths put some requests past the model's
    context: they are simulated as if served, where a serving engine would refuse them (a
    workload whose bounded lengths exceed it is refused before the run, `sim.run`)."""
    w = sc.workload
    if isinstance(w, TraceWorkload):
        return None
    share = share_longer_than(w, context_tokens)
    if share == 0.0:
        return None
    return (
        f"about {share:.2%} of the requests (prompt + answer) exceed {sc.model}'s "
        f"{context_tokens:,}-token context: they are simulated as if served, which a serving "
        "engine would refuse. Cap the lengths (max_tokens) to keep them inside it"
    )


def cpu_profile_note(profile: Profile | None) -> str | None:
    """A warning when the times come from a profile measured on a CPU."""
    if profile is None or not profile.device.name.lower().startswith("cpu"):
        return None
    return (
        f"profile {profile.name!r} was measured on a CPU ({profile.device.name}): its times and "
        "efficiencies say nothing about a GPU. Use it to try the harness; calibrate on the GPU "
        "to plan with it"
    )


def run_notes(
    sc: Scenario, results: Results, profile: Profile | None, model: ModelSpec | None = None
) -> list[str]:
    """Every note that applies to a run, most important first; `model` is the scenario's,
    resolved (`sim.io.resolve`), else looked up here."""
    model = model or load_model(sc.model)
    open_loop = not isinstance(sc.workload, ClosedWorkload)
    notes = (
        cpu_profile_note(profile),
        context_note(sc, model.max_position_tokens),
        empty_note(results),
        rejected_note(results),
        overload_note(results, open_loop),
        unfinished_note(results, open_loop),
        noisy_note(results),
        lockstep_note(sc),
        extrapolated_note(results),
        launch_note(results),
    )
    return [n for n in notes if n is not None]
