"""A sweep's plan, made once its capture is in: which searches run and in what order (by expected gain per second
where the capture profiled the step, ``tuner.budget.gain``), each phase's share of the time budget, and the time
budget itself where the preset takes one from max-autotune's expected compile."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

from tuner.budget import gain, shares
from tuner.budget.estimate import (
    ALONE,
    PRIORS,
    REPLAY_S,
    TRIAL_COMPILES,
    max_autotune_choices,
    max_autotune_renders,
    max_autotune_s,
    prior_choice_share,
)
from tuner.budget.gain import Profile
from tuner.budget.presets import MAX_AUTOTUNE_SHARE, within_max_autotune
from tuner.measure import CaptureResult
from tuner.search_spaces.attention import KIND as ATTENTION
from tuner.sweep.options import SweepOptions
from tuner.sweep.phases import (
    CudaGraphPhase,
    FreezingPhase,
    FusionPhase,
    GraphKnobPhase,
    GraphStudyPhase,
    KernelPhase,
    Phase,
    SitePhase,
    SweepContext,
    WholeCheckPhase,
    search_names,
    study_phases,
)
from tuner.sweep.phases.cuda_graphs import by_hand, worth_measuring
from tuner.sweep.phases.forecast import first_trials, forecast, forecast_line
from tuner.sweep.progress import Progress

# On CUDA the fusion phase is given at least one trial's compiles while the sweep can afford them: a grouping there
# can move the step more than the kernels' winners do.
FUSION_COMPILES = TRIAL_COMPILES


def phases(
    middle: list[Phase],
    whole: WholeCheckPhase,
    cuda_graphs: CudaGraphPhase | None = None,
    lead: bool = False,
    freezing: FreezingPhase | None = None,
    kernels: bool = True,
) -> Iterator[Phase]:
    """The sweep's phases in order; each plans when its turn comes, so it sees what the phases before it stored. On
    CUDA whether the workload runs under CUDA graphs comes first (every later whole-workload trial then times it as
    it will run); then, for frozen inference, whether it runs frozen (``freezing``; where it was captured again
    unfrozen, CUDA graphs are measured again for that capture); then the searches ``middle``
    (:func:`searches_by_gain`), the whole-workload check, and the kernels of the set the check kept where the kernel
    search did not capture those (the check dropped a winner, or there was no time to compile the winners before it).
    ``lead``: the template sites take all the time left (:func:`with_shares`); ``kernels``: False where the sweep
    leaves the Triton kernels out, after the check too."""
    if cuda_graphs is not None:
        yield cuda_graphs
    if freezing is not None:
        yield freezing
        if freezing.switched and cuda_graphs is not None:
            yield CudaGraphPhase(freezing.idle_share, by_hand=cuda_graphs.by_hand)
    yield from with_shares(middle, lead, whole)
    yield whole
    searched = next((p for p in middle if isinstance(p, KernelPhase)), None)

    def kernels_not_captured(sweep: SweepContext) -> bool:
        return (searched.stale(sweep) if searched is not None else bool(whole.reverted)) and sweep.can_capture()

    if kernels:
        yield KernelPhase("of the set the whole-workload check kept", when=kernels_not_captured, after_check=True)


def searches(opts: SweepOptions) -> list[Phase]:
    """The searches between the CUDA-graph phase and the check, in the order they run where nothing reorders them
    (``tuner.budget.gain``): template sites; on CUDA the graph studies of kinds with a phase of their own (the
    attention backends: a decomposed attention makes GEMM sites of its own), the fusion groupings, then the Triton
    kernels, captured with every winner so far forced (a grouping decides which kernels exist: an epilogue fused into a
    template is a kernel fewer); on the CPU the studies, the groupings, then the codegen knobs, which win least
    often."""
    studies = [GraphStudyPhase(name, device_type=opts.spec.device) for name in study_phases(opts.spec.device)]
    fusion = [FusionPhase(compiles=FUSION_COMPILES if opts.spec.device == "cuda" else 0.0)] if opts.fusion else []
    made = {
        p.name: p
        for p in (
            SitePhase(),
            *studies,
            *fusion,
            KernelPhase("compiling with every winner so far forced"),
            GraphKnobPhase(),
        )
    }
    return [made[n] for n in search_names(opts.spec.device) if n in made and n not in opts.skip]


def with_shares(middle: list[Phase], lead: bool = False, whole: WholeCheckPhase | None = None) -> list[Phase]:
    """The phases, each with its share of the time left when it starts (``tuner.budget.shares.share``); where the
    last one's trials each time the whole workload, it may also take the time kept for the end when nothing is left
    for ``whole`` to check (:meth:`WholeCheckPhase.lend`)."""
    for i, p in enumerate(middle):
        p.share = shares.share(p.name, last=i == len(middle) - 1, lead=lead)
    if middle and middle[-1].whole_step and whole is not None:
        middle[-1].lender = whole
    return middle


def searches_by_gain(
    opts: SweepOptions,
    profile: Profile | None,
    cost_s: dict[str, float],
    progress: Progress,
    first_s: dict[str, float] | None = None,
    graphs_first: bool = False,
    held: str | None = None,
) -> list[Phase]:
    """The searches by expected gain per second (``tuner.budget.gain``; ``first_s``: the cost of a phase's first trial,
    where that trial holds a gain of its own), where the capture profiled the step, else in their own order; with a
    time budget, a phase whose every trial is the whole workload is left out where its expected gain is below what
    such a trial must win by (``Budget.min_gain``) of the step as it times it (``graphs_first``: under CUDA graphs).
    ``held``: the phase the time budget was raised to hold (:func:`floor_s`), first whatever its rate."""
    middle = {p.name: p for p in searches(opts)}
    if profile is None:
        return sorted(middle.values(), key=lambda p: p.name != held)

    def rank(name: str) -> int:
        cheap = (
            held is not None
            and not middle[name].whole_step
            and 0 < cost_s.get(name, 0.0) <= shares.CHEAP_S
            and (profile.gain_ms(name) or 0.0) > 0
        )
        return 0 if cheap else 1 if name == held else 2

    order = sorted(gain.by_gain(list(middle), profile, cost_s, first_s), key=rank)
    for name in [n for n in order if middle[n].whole_step and opts.budget.time_budget_s is not None]:
        if not gain.worth_a_trial(profile, name, opts.budget.min_gain, graphs_first):
            progress.note(
                f"{name}: expected gain ~{profile.gain_ms(name) or 0.0:.3g} ms, under the "
                f"{opts.budget.min_gain:.0%} of the step a whole-workload trial must win by: "
                "not measured within this time budget"
            )
            order.remove(name)
    progress.note(gain.gains_line(profile, order, cost_s))
    return [middle[n] for n in order]


def end_compiles(opts: SweepOptions, settled: bool = False) -> int:
    """What the end's measurements compile (``tuner.budget.shares.end_compiles``): the workload unfrozen too for
    frozen inference, unless that is ``settled`` (timed by the freezing phase, :func:`freezing_first`; or not to be
    timed)."""
    return shares.end_compiles(unfrozen=opts.spec.uses_freezing and opts.time_unfrozen and not settled)


def freezing_first(opts: SweepOptions) -> bool:
    """Whether the sweep times the workload unfrozen before its searches (``FreezingPhase``): frozen inference on the
    CPU, one worker (several share the searches, and the last one to finish times it at the end), unless told not to.
    On CUDA the end's check times it where time allows: there, timing it first would take two compiles from the
    searches for a change that CUDA graphs mostly hide."""
    return opts.spec.uses_freezing and opts.workers == 1 and opts.time_unfrozen and opts.spec.device == "cpu"


def sized(
    opts: SweepOptions, capture: CaptureResult, progress: Progress, t0: float, profile: Profile | None = None
) -> tuple[SweepOptions, bool, bool]:
    """The options with the budget's own time budget, where it takes one from max-autotune's expected compile time
    (``--budget default`` with no ``--time-budget``, on a device where that cost was measured); whether that budget
    was raised to hold the first trials (:func:`floor_s`); and whether they include a site batch, which then goes
    first and takes all the time left."""
    listed = max_autotune_choices(capture.sites)
    renders = max_autotune_renders(capture.sites)
    expected = max_autotune_s(opts.spec.device, capture.compile_s, listed, len(capture.kernels), renders)
    floor, sites = floor_s(opts, capture, time.monotonic() - t0, expected, profile)
    budget = within_max_autotune(opts.budget, expected, floor)
    if budget is opts.budget:
        return opts, False, False
    held = floor > MAX_AUTOTUNE_SHARE * (expected or 0.0)
    first = (
        "the workload under CUDA graphs, then a batch of its template sites,"
        if sites
        else "the workload under CUDA graphs,"
    )
    progress.note(
        f"--budget {budget.name}: max-autotune would take ~{expected:.0f} s to compile this workload (an "
        f"estimate, from its {len(listed)} template choices, rendered {renders} times at its sites, and "
        f"{len(capture.kernels)} Triton kernels), so this sweep takes a time budget of "
        f"{budget.time_budget_s:.0f} s from the command's start (--time-budget S: another)"
        + (
            f"; more than that share of it, so that its first trials, {first} fit after the "
            f"capture's {sum(capture.costs.values()):.0f} s"
            if held
            else ""
        )
    )
    return dataclasses.replace(opts, budget=budget), held, held and sites


def floor_s(
    opts: SweepOptions,
    capture: CaptureResult,
    spent_s: float,
    max_autotune_s: float | None,
    profile: Profile | None = None,
) -> tuple[float, bool]:
    """(the least time budget that holds the sweep's first trials, whether they include a template-site batch;
    ``tuner.budget.shares.floor_s``), where the workload under CUDA graphs comes first (the GPU waits for the host):
    that trial is a replay by hand of an inference step, else a compile. The site batch (a compile and
    ``FLOOR_CHOICES`` candidates at every site) is held where the ``profile`` expects the sites to gain what a winner
    must win by of the step under CUDA graphs (unknown: they may)."""
    if not graphs_first(opts, capture):
        return 0.0, False
    graphs = REPLAY_S if by_hand(opts.spec.mode) else capture.compile_s
    worth = (
        bool(capture.sites)
        and SitePhase.name not in opts.skip
        and (profile is None or gain.worth_a_trial(profile, gain.SITES, opts.budget.min_gain, graphs_first=True))
    )
    probe = (
        (shares.FLOOR_CHOICES + 1) * len(capture.sites) * prior_choice_share(opts.spec.device)
    )  # as the batch is sized
    batch = capture.compile_s + probe + _alone_s(opts, profile) if worth else None
    return shares.floor_s(spent_s, graphs, batch, max_autotune_s, MAX_AUTOTUNE_SHARE)


def _alone_s(opts: SweepOptions, profile: Profile | None) -> float:
    """What timing the attention sites alone is expected to cost, where the profile found attention calls to time on
    CUDA (they then run before the template sites, ``shares.CHEAP_S``); else 0."""
    if opts.spec.device != "cuda" or profile is None or not profile.study_ms.get(ATTENTION.phase):
        return 0.0
    return PRIORS["cuda"][ALONE]


def graphs_searched(opts: SweepOptions) -> bool:
    return opts.spec.device == "cuda" and CudaGraphPhase.name not in opts.skip


def graphs_first(opts: SweepOptions, capture: CaptureResult) -> bool:
    """Whether the workload under CUDA graphs is measured first: on CUDA, where the GPU waits for the host."""
    return graphs_searched(opts) and worth_measuring(capture.idle_share)


def ordered(
    opts: SweepOptions,
    sweep: SweepContext,
    capture: CaptureResult,
    profile: Profile | None,
    progress: Progress,
    whole: WholeCheckPhase,
    lead: bool,
) -> Iterator[Phase]:
    """The sweep's phases (:func:`phases`), the searches by expected gain, with the whole sweep's forecast said first."""
    cuda_graphs = CudaGraphPhase(capture.idle_share, by_hand=by_hand(opts.spec.mode)) if graphs_searched(opts) else None
    freezing = FreezingPhase() if freezing_first(opts) else None
    frozen = any(g.get("frozen") for g in capture.graphs)
    fusion_graphs = len(capture.graphs) if opts.fusion else 0
    parts = forecast(sweep, capture.kernels, fusion_graphs, frozen, cuda_graphs, freezing)
    first = first_trials(sweep, fusion_graphs)
    middle = searches_by_gain(
        opts, profile, parts, progress, first, graphs_first(opts, capture), SitePhase.name if lead else None
    )
    left_out = ({p.name for p in searches(opts)} - {p.name for p in middle}) | opts.skip
    progress.note(forecast_line(opts.budget, {name: s for name, s in parts.items() if name not in left_out}))
    return phases(middle, whole, cuda_graphs, lead, freezing, KernelPhase.name not in opts.skip)
