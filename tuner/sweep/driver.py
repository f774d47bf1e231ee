"""The sweep driver: capture the workload, store its tasks, then run the phases (``tuner.sweep.phases``): CUDA graphs
first where the GPU waits for the host, then the searches (template sites, graph studies, fusion groupings, Triton
kernels on CUDA; graph knobs on the CPU) by expected gain per second where the capture profiled the step
(``tuner.sweep.gain``), the whole-workload check last."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from tuner.sweep.budget import MAX_AUTOTUNE_SHARE, Budget, within_max_autotune
from tuner.core import Status, TaskOutcome, TaskSpec
from tuner.db import Database, DeviceInfo, EnvironmentInfo
from tuner.db.claims import release_all, worker_id
from tuner.search_spaces.attention import KIND as ATTENTION
from tuner.sweep.clock import CLOSING_S, instances_by
from tuner.sweep.estimate import ALONE, PRIORS, max_autotune_choices, max_autotune_renders, max_autotune_s, prior_choice_share
from tuner.measure import CaptureResult, Worker
from tuner.measure.load import others_note
from tuner.sweep.phases import (
    CudaGraphPhase, FreezingPhase, FusionPhase, GraphKnobPhase, GraphStudyPhase, KernelPhase, Phase, SitePhase, SweepContext, WholeCheckPhase, Workload, run_phases,
    search_names, study_phases,
)
from tuner.sweep.phases.cuda_graphs import REPLAY_S, by_hand, worth_measuring
from tuner.sweep.phases.graphs import TRIAL_COMPILES
from tuner.sweep.phases.whole import UNFROZEN_COMPILES, WHOLE_COMPILES
from tuner.sweep.phases.forecast import first_trials, forecast, forecast_line
from tuner.sweep import gain
from tuner.sweep.gain import Profile
from tuner.sweep.progress import Progress
from tuner.ranking import PriorRows, Rankers
from tuner.ranking.prior import read_ahead, rows_for
from tuner.study.context import open_storage, StudyContext
from tuner.settings import settings
from tuner.sweep.tasks import tasks_from_capture
from tuner.workloads.spec import WorkloadSpec


@dataclass(frozen=True)
class SweepOptions:
    spec: WorkloadSpec
    budget: Budget
    db_url: str
    sampler: str = "tpe"
    seed: int = 0
    from_similar: bool = False
    workers: int = 1  # local workers sharing this sweep (each takes a share of the template sites)
    fusion: bool = True  # search fusion groupings per graph after the kernel winners
    ranking: bool = True  # measure the candidates a model fit on the database predicts fastest (tuner.ranking)
    prior: bool = True  # also learn from (and seed with) the measurements tuner ships for this device model or its architecture
    started: float | None = None  # time.monotonic() when the command started: a time budget counts from there
    time_unfrozen: bool = True  # frozen inference: time the workload unfrozen first (``FreezingPhase``), else tune it frozen
    skip: frozenset[str] = frozenset()  # phases left out (``tuner.sweep.phases.skippable``): their tasks keep Inductor's choices


@dataclass
class SweepReport:
    workload: str
    device: str
    graph_breaks: dict[str, int]
    eager_ms: float | None
    capture_compile_s: float | None = None  # the first compile, with Inductor's defaults
    outcomes: list[TaskOutcome] = field(default_factory=list)
    default_ms: float | None = None
    tuned_ms: float | None = None
    interrupted: bool = False
    wall_s: float = 0.0
    trials_measured: int = 0
    whole_checked: bool = False  # this worker measured all winners together (the last worker to finish does)
    unfrozen_ratio: float | None = None  # where the workload won unfrozen: its time over the winners' frozen
    baseline: str = "Inductor's defaults"  # what ``default_ms`` timed

    @property
    def speedup(self) -> float | None:
        return self.default_ms / self.tuned_ms if self.default_ms and self.tuned_ms else None


# With a time budget, each phase gets this share of the time still left when it starts (what a phase leaves unused
# flows to the next); the last before the whole-workload check gets all of it. Without a share, the first phase
# could take the whole budget. A graph study of a kind's own phase (the attention backends) gets STUDY_SHARE.
PHASE_SHARE = {SitePhase.name: 0.4, GraphKnobPhase.name: 0.5, FusionPhase.name: 0.7, KernelPhase.name: 0.5}
STUDY_SHARE = 0.5
# On CUDA the fusion phase is given at least one trial's compiles while the sweep can afford them: on resnet50
# (H200) a grouping gave ten percent, the kernels' winners a few (bench/results/h200/resnet50-bf16-b32-2026-11-30.jsonl.gz).
FUSION_COMPILES = TRIAL_COMPILES
WHOLE_SHARE = 0.15  # of a time budget, kept for verification and the whole-workload check at the end
# ... grown up to this share to also hold timing the workload unfrozen (frozen inference): a 240-s efficientnet_b0
# sweep on a 2-core CPU kept 36 s, its check took one 24.5-s compile, and the unfrozen arm (freezing cost it 19%)
# found no time (bench/results/cpu-xeon-2c/efficientnet_b0-b1-64-sweep240-2026-12-02.log).
MAX_END_SHARE = 0.35
CPU_RECYCLE = 12  # CPU trials a worker serves before a fresh one (a CUDA worker's restart recompiles the model twice)


def phases(middle: list[Phase], whole: WholeCheckPhase, cuda_graphs: CudaGraphPhase | None = None, lead: bool = False,
           freezing: FreezingPhase | None = None, kernels: bool = True) -> Iterator[Phase]:
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
    (``tuner.sweep.gain``): template sites; on CUDA the graph studies of kinds with a phase of their own (the
    attention backends: a decomposed attention makes GEMM sites of its own), the fusion groupings, then the Triton
    kernels, captured with every winner so far forced (a grouping decides which kernels exist: an epilogue fused into a
    template is a kernel fewer); on the CPU the studies, the groupings, then the codegen knobs, which no trial of our
    CPU sweeps won with (14, the best 0.992x; groupings won up to 0.73x: bench/results/cpu-*/)."""
    studies = [GraphStudyPhase(name, device_type=opts.spec.device) for name in study_phases(opts.spec.device)]
    fusion = [FusionPhase(compiles=FUSION_COMPILES if opts.spec.device == "cuda" else 0.0)] if opts.fusion else []
    made = {p.name: p for p in (SitePhase(), *studies, *fusion, KernelPhase("compiling with every winner so far forced"), GraphKnobPhase())}
    return [made[n] for n in search_names(opts.spec.device) if n in made and n not in opts.skip]


def with_shares(middle: list[Phase], lead: bool = False, whole: WholeCheckPhase | None = None) -> list[Phase]:
    """The phases, each with its share of the time left when it starts (:data:`PHASE_SHARE`); the last, all of it,
    and where each of its trials times the whole workload, the time kept for the end too when nothing is left for
    ``whole`` to check (:meth:`WholeCheckPhase.lend`). ``lead``: the template sites take all of it too (the budget
    was sized to hold their batch, :func:`_floor_s`)."""
    for i, p in enumerate(middle):
        p.share = 1.0 if i == len(middle) - 1 or (lead and p.name == SitePhase.name) else PHASE_SHARE.get(p.name, STUDY_SHARE)
    if middle and middle[-1].whole_step and whole is not None:
        middle[-1].lender = whole
    return middle


# A search expected to take at most this long, with no whole-workload trial (the attention sites timed alone), runs
# before the phase a budget was raised to hold, which then takes all the time left: the floor holds both.
CHEAP_S = 5.0


def searches_by_gain(opts: SweepOptions, profile: Profile | None, cost_s: dict[str, float], progress: Progress,
                     first_s: dict[str, float] | None = None, graphs_first: bool = False, held: str | None = None) -> list[Phase]:
    """The searches by expected gain per second (``tuner.sweep.gain``; ``first_s``: the cost of a phase's first trial,
    where that trial holds a gain of its own), where the capture profiled the step, else in their own order; with a
    time budget, a phase whose every trial is the whole workload is left out where its expected gain is below what
    such a trial must win by (``Budget.min_gain``) of the step as it times it (``graphs_first``: under CUDA graphs).
    ``held``: the phase the time budget was raised to hold (:func:`_floor_s`), first whatever its rate."""
    middle = {p.name: p for p in searches(opts)}
    if profile is None:
        return sorted(middle.values(), key=lambda p: p.name != held)

    def rank(name: str) -> int:
        cheap = held is not None and not middle[name].whole_step and 0 < cost_s.get(name, 0.0) <= CHEAP_S and (profile.gain_ms(name) or 0.0) > 0
        return 0 if cheap else 1 if name == held else 2

    order = sorted(gain.by_gain(list(middle), profile, cost_s, first_s), key=rank)
    for name in [n for n in order if middle[n].whole_step and opts.budget.time_budget_s is not None]:
        if not gain.worth_a_trial(profile, name, opts.budget.min_gain, graphs_first):
            progress.note(f"{name}: expected gain ~{profile.gain_ms(name) or 0.0:.3g} ms, under the {opts.budget.min_gain:.0%} of the step a "
                          "whole-workload trial must win by: not measured within this time budget")
            order.remove(name)
    progress.note(gain.gains_line(profile, order, cost_s))
    return [middle[n] for n in order]


def _end_compiles(opts: SweepOptions, settled: bool = False) -> int:
    """What the end's measurements compile: the check's winners, and the workload unfrozen (frozen inference) unless
    that is ``settled`` (timed by the freezing phase, :func:`freezing_first`; or not to be timed). The defaults'
    compile is the capture's, which the worker holds through the end (``Worker.held``: a CPU worker is otherwise
    recycled every CPU_RECYCLE trials, and a 120-s mobilenet_v2 sweep's check took 2.8 compiles)."""
    return WHOLE_COMPILES + (UNFROZEN_COMPILES if opts.spec.uses_freezing and opts.time_unfrozen and not settled else 0)


def freezing_first(opts: SweepOptions) -> bool:
    """Whether the sweep times the workload unfrozen before its searches (``FreezingPhase``): frozen inference on the
    CPU, one worker (several share the searches, and the last one to finish times it at the end), unless told not to.
    On CUDA the end's check times it where time allows: under CUDA graphs freezing moved vit_b_32's step by 0.4%, and
    timing it first took 41 s of a 100-s budget (two compiles), which the fusion groupings' expected 0.26 ms (its
    patchify convolution's rewrite, 0.71x the best Inductor mode) then lacked (H100, torch 2.11,
    bench/results/h100/sweep-vit_b_32-bf16-b32-freezing-first-2026-12-05.log)."""
    return opts.spec.uses_freezing and opts.workers == 1 and opts.time_unfrozen and opts.spec.device == "cpu"


def promised_end_s(budget_s: float) -> float:
    """The most a sweep with a time budget of ``budget_s`` may take: 1.1 x the budget + 20 s (a trial in flight at
    the deadline, the closing writes, the worker's exit)."""
    return 1.1 * budget_s + 20.0


def _deadlines(budget_s: float | None, t0: float, check_s: float = 0.0, end_s: float = 0.0, keep_end: bool = True) -> dict[str, float | None]:
    """The phases' deadline (the budget less the share kept for the end) and the sweep's own, which verification and
    the whole-workload check may run to. A share too small to hold the check (``check_s``: its expected cost) would
    go unused: the phases get it (a 60-s CPU sweep of resnet18 kept 9 s for an 11-s check and measured nothing).
    ``end_s``: what the end's measurements cost together (the check and the unfrozen arm); the share grows to hold
    them where that stays within :data:`MAX_END_SHARE` of the budget. ``keep_end`` off (a budget raised to hold the
    first trials alone, :func:`_floor_s`): only the closing's time is kept, and the end runs where they leave time."""
    if not budget_s:
        return {"deadline": None, "settle_by": None}
    if not keep_end:
        return {"deadline": t0 + budget_s - CLOSING_S, "settle_by": t0 + budget_s}
    kept = WHOLE_SHARE * budget_s
    if kept < end_s <= MAX_END_SHARE * budget_s:
        kept = end_s
    return {"deadline": t0 + budget_s - (kept if kept >= check_s else 0.0), "settle_by": t0 + budget_s}


def _context(opts: SweepOptions, db: Database, worker: Worker, capture: CaptureResult, progress: Progress, t0: float,
             tasks: list[TaskSpec], keep_end: bool = True) -> SweepContext:
    device = DeviceInfo(**capture.device)
    device_id = db.device_id(device)
    prior = rows_for(device.kind, device.name, (device.info or {}).get("capability")) if opts.prior else PriorRows()
    if prior.files:
        where = device.name if prior.devices == (device.name,) else f"{', '.join(prior.devices)} (the {device.name}'s architecture, " \
            f"compute capability {device.info['capability']})"
        progress.note(f"learning also from the measurements tuner ships for the {where} ({', '.join(prior.files)}; --no-prior: not)")
    check_s = WHOLE_COMPILES * capture.later_compile_s
    deadlines = _deadlines(opts.budget.time_budget_s, t0, check_s, _end_compiles(opts) * capture.later_compile_s, keep_end)
    # The end's share holds the unfrozen measurement until the freezing phase has taken it at the start; then the phases
    # get what the end no longer needs (never less than they had: a share too small for the end went to them).
    settled = _deadlines(opts.budget.time_budget_s, t0, check_s, _end_compiles(opts, settled=True) * capture.later_compile_s, keep_end)
    freed = max(0.0, (settled["deadline"] or 0.0) - (deadlines["deadline"] or 0.0))
    tuning = StudyContext(
        db=db, storage=open_storage(opts.db_url), device_id=device_id, prior=prior,
        rankers=Rankers(db, device_id, prior) if opts.ranking else None,
        environment_id=db.environment_id(EnvironmentInfo(**capture.environment)), device_fingerprint=device.fingerprint,
        sampler=opts.sampler, seed=opts.seed, budget=opts.budget,
        from_similar=opts.from_similar, costs=worker.costs, on_stored=progress.trial,
        **deadlines,
    )
    workload = Workload(db, opts.spec.name)
    workload.register(tasks)
    return SweepContext(tuning, worker, progress, workload, opts.spec.device, opts.spec.model, opts.workers,
                        freezing_settled=not opts.time_unfrozen, freed_s=freed if freezing_first(opts) else 0.0).captured(capture)


# Candidates per site a floor's site batch holds (besides each site's default): the ranked few a first batch offers
# where the floor leaves it no more time.
FLOOR_CHOICES = 4


def _capture_limit(opts: SweepOptions, t0: float) -> float | None:
    """Seconds the capture may take so that a sweep with a time budget still ends when it promised, however cold the
    caches (a new environment's first compile can outlast a short budget by itself); None without a budget."""
    if opts.budget.time_budget_s is None:
        return None
    return max(1.0, t0 + promised_end_s(opts.budget.time_budget_s) - CLOSING_S - time.monotonic())


def run_sweep(opts: SweepOptions, progress: Progress | None = None) -> SweepReport:
    """Tune every task of the workload, phase by phase. Every trial is committed as it is measured, so an interrupt
    (``KeyboardInterrupt``) loses at most the trial in flight; the partial report is marked interrupted."""
    progress = progress or Progress()
    t0 = opts.started if opts.started is not None else time.monotonic()
    db = Database.open(opts.db_url)
    recycle = CPU_RECYCLE if opts.spec.device == "cpu" else 10**6
    worker = Worker(opts.spec, settings().cache_dir / "logs", trial_timeout_s=opts.budget.trial_timeout_s, recycle_after=recycle)
    report: SweepReport | None = None
    sweep: SweepContext | None = None
    whole = WholeCheckPhase()
    try:
        if note := others_note(opts.spec.device):
            progress.note(note)
        progress.note(f"capturing {opts.spec.name} (compiling with Inductor's defaults)")
        if opts.prior:
            read_ahead(opts.spec.device, opts.ranking)  # while the capture runs
        worker.instances_by = instances_by(opts.budget.time_budget_s, t0)
        capture = worker.start(_capture_limit(opts, t0))
        progress.note(capture.cost_line())
        if note := capture.instance_note():
            progress.note(note)
        report = SweepReport(opts.spec.name, capture.device.get("name", ""), capture.graph_breaks, capture.eager_ms, capture.compile_s)
        if opts.spec.device == "cpu":
            progress.note(f"measuring on CPU core(s) {','.join(map(str, capture.cores))} with {opts.spec.threads or 'torch default'} thread(s)")
        tasks = tasks_from_capture(capture, opts.spec.model)
        profile = Profile.of(capture, tasks)
        opts, held, lead = _sized(opts, capture, progress, t0, profile)
        sweep = _context(opts, db, worker, capture, progress, t0, tasks, keep_end=not held)
        cuda_graphs = CudaGraphPhase(capture.idle_share, by_hand=by_hand(opts.spec.mode)) if _graphs_searched(opts) else None
        freezing = FreezingPhase() if freezing_first(opts) else None
        frozen = any(g.get("frozen") for g in capture.graphs)
        parts = forecast(sweep, capture.kernels, len(capture.graphs) if opts.fusion else 0, frozen, cuda_graphs, freezing)
        first = first_trials(sweep, len(capture.graphs) if opts.fusion else 0)
        middle = searches_by_gain(opts, profile, parts, progress, first, _graphs_first(opts, capture), SitePhase.name if lead else None)
        left_out = ({p.name for p in searches(opts)} - {p.name for p in middle}) | opts.skip
        progress.note(forecast_line(opts.budget, {name: s for name, s in parts.items() if name not in left_out}))
        run_phases(sweep, phases(middle, whole, cuda_graphs, lead, freezing, KernelPhase.name not in opts.skip))
    except KeyboardInterrupt:
        release_all(db, worker_id())
        if report is None:
            raise
        report.interrupted = True
    finally:
        worker.close()
        if report is not None:
            _finish(report, sweep, whole, time.monotonic() - t0)
        db.close()
    assert report is not None
    return report


def _sized(opts: SweepOptions, capture: CaptureResult, progress: Progress, t0: float,
           profile: Profile | None = None) -> tuple[SweepOptions, bool, bool]:
    """The options with the budget's own time budget, where it takes one from max-autotune's expected compile time
    (``--budget default`` with no ``--time-budget``, on a device where that cost was measured); whether that budget
    was raised to hold the first trials (:func:`_floor_s`); and whether they include a site batch, which then goes
    first and takes all the time left."""
    listed = max_autotune_choices(capture.sites)
    renders = max_autotune_renders(capture.sites)
    expected = max_autotune_s(opts.spec.device, capture.compile_s, listed, len(capture.kernels), renders)
    floor, sites = _floor_s(opts, capture, time.monotonic() - t0, expected, profile)
    budget = within_max_autotune(opts.budget, expected, floor)
    if budget is opts.budget:
        return opts, False, False
    held = floor > MAX_AUTOTUNE_SHARE * (expected or 0.0)
    first = "the workload under CUDA graphs, then a batch of its template sites," if sites else "the workload under CUDA graphs,"
    progress.note(f"--budget {budget.name}: max-autotune would take ~{expected:.0f} s to compile this workload (an estimate, from "
                  f"its {len(listed)} template choices, rendered {renders} times at its sites, and {len(capture.kernels)} Triton kernels), so this sweep takes a time budget of {budget.time_budget_s:.0f} s from the "
                  "command's start (--time-budget S: another)"
                  + (f"; more than that share of it, so that its first trials, {first} fit after the "
                     f"capture's {sum(capture.costs.values()):.0f} s" if held else ""))
    return dataclasses.replace(opts, budget=budget), held, held and sites


def _floor_s(opts: SweepOptions, capture: CaptureResult, spent_s: float, max_autotune_s: float | None,
             profile: Profile | None = None) -> tuple[float, bool]:
    """(the least time budget that holds the sweep's first trials, whether they include a template-site batch). Where
    the workload under CUDA graphs comes first (the GPU waits for the host): the time so far, that trial (a replay by
    hand of an inference step, else a compile) and the closing. CUDA graphs alone give what Inductor's reduce-overhead
    mode gives, and max-autotune also tunes the template sites: where the ``profile`` expects the sites to gain what a
    winner must win by of the step under CUDA graphs (unknown: they may), the floor holds one site batch too (a compile
    and :data:`FLOOR_CHOICES` candidates at every site), even past max-autotune's expected compile. Capped at that
    compile, gpt2's batch timed no choice (bench/results/h100/*-floor-capped-2026-12-07.*: tuned 1.013x max-autotune's
    step, against 0.902x uncapped). gpt2's decode step on the H200: max-autotune compiled it in 46 s, the capture alone
    took 29-35 s, and cuBLAS ran its vocabulary projection (50257 columns) in 103 us where a Triton template took 26
    (bench/results/h200/profile-hf_gpt2-decode-bf16-b8-s512-2026-12-04.json)."""
    if not _graphs_first(opts, capture):
        return 0.0, False
    graphs = REPLAY_S if by_hand(opts.spec.mode) else capture.compile_s
    one = first_trials_s(spent_s, graphs)
    if not capture.sites or SitePhase.name in opts.skip or (profile is not None and not gain.worth_a_trial(profile, gain.SITES, opts.budget.min_gain, graphs_first=True)):
        return one, False
    probe = (FLOOR_CHOICES + 1) * len(capture.sites) * prior_choice_share(opts.spec.device)  # as the batch is sized
    with_sites = first_trials_s(spent_s, graphs + capture.compile_s + probe + _alone_s(opts, profile))
    if with_sites <= MAX_AUTOTUNE_SHARE * (max_autotune_s or 0.0):
        return one, False
    return with_sites, True


def _alone_s(opts: SweepOptions, profile: Profile | None) -> float:
    """What timing the attention sites alone is expected to cost, where the profile found attention calls to time on
    CUDA (they then run before the template sites, :data:`CHEAP_S`); else 0."""
    if opts.spec.device != "cuda" or profile is None or not profile.study_ms.get(ATTENTION.phase):
        return 0.0
    return PRIORS["cuda"][ALONE]


def _graphs_searched(opts: SweepOptions) -> bool:
    return opts.spec.device == "cuda" and CudaGraphPhase.name not in opts.skip


def _graphs_first(opts: SweepOptions, capture: CaptureResult) -> bool:
    """Whether the workload under CUDA graphs is measured first: on CUDA, where the GPU waits for the host."""
    return _graphs_searched(opts) and worth_measuring(capture.idle_share)


def first_trials_s(spent_s: float, trials_s: float) -> float:
    """The time budget that holds ``trials_s`` of trials after ``spent_s``, and the closing. Nothing is kept for the end
    of a budget so sized (:func:`_deadlines`): the whole-workload check runs where the trials leave time."""
    return spent_s + trials_s + CLOSING_S


def _finish(report: SweepReport, sweep: SweepContext | None, whole: WholeCheckPhase, wall_s: float) -> None:
    report.wall_s = wall_s
    if sweep is None:
        return
    report.outcomes = [sweep.outcomes[r.id] for r in [*sweep.former, *sweep.workload.records] if r.id in sweep.outcomes]
    # Every trial this sweep stored but those its spaces rejected unmeasured: the defaults' timings included.
    report.trials_measured = sum(n for status, n in sweep.tuning.stored.items() if status != Status.INVALID.value)
    report.whole_checked = whole.checked
    report.default_ms, report.tuned_ms, report.unfrozen_ratio = whole.default_ms, whole.tuned_ms, sweep.unfrozen_ratio
    report.baseline = whole.baseline
