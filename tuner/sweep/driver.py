"""The sweep: capture the workload, plan its searches (``tuner.sweep.plan``), run the phases
(``tuner.sweep.phases``) until the time budget (``tuner.budget``) is spent, check the whole workload, and report."""

from __future__ import annotations

import time

from tuner.budget import shares
from tuner.budget.clock import CLOSING_S, instances_by
from tuner.budget.estimate import WHOLE_COMPILES
from tuner.core import Status, TaskSpec
from tuner.db import Database, DeviceInfo, EnvironmentInfo
from tuner.db.claims import release_all, worker_id
from tuner.measure import CaptureResult, Worker
from tuner.measure.load import others_note
from tuner.ranking import PriorRows, Rankers
from tuner.ranking.prior import read_ahead, rows_for
from tuner.settings import settings
from tuner.study.context import StudyContext, open_storage
from tuner.sweep import plan
from tuner.sweep.options import SweepOptions, SweepReport
from tuner.sweep.phases import SweepContext, WholeCheckPhase, Workload, run_phases
from tuner.sweep.profile import profile_of
from tuner.sweep.progress import Progress
from tuner.sweep.tasks import tasks_from_capture

CPU_RECYCLE = 12  # CPU trials a worker serves before a fresh one (a CUDA worker's restart recompiles the model twice)


def run_sweep(opts: SweepOptions, progress: Progress | None = None) -> SweepReport:
    """Tune every task of the workload, phase by phase. Every trial is committed as it is measured, so an interrupt
    (``KeyboardInterrupt``) loses at most the trial in flight; the partial report is marked interrupted."""
    progress = progress or Progress()
    t0 = opts.started if opts.started is not None else time.monotonic()
    db = Database.open(opts.db_url)
    recycle = CPU_RECYCLE if opts.spec.device == "cpu" else 10**6
    worker = Worker(
        opts.spec, settings().cache_dir / "logs", trial_timeout_s=opts.budget.trial_timeout_s, recycle_after=recycle
    )
    report: SweepReport | None = None
    sweep: SweepContext | None = None
    whole = WholeCheckPhase()
    try:
        capture = _capture(opts, worker, progress, t0)
        report = SweepReport(
            opts.spec.name, capture.device.get("name", ""), capture.graph_breaks, capture.eager_ms, capture.compile_s
        )
        tasks = tasks_from_capture(capture, opts.spec.model)
        profile = profile_of(capture, tasks)
        opts, held, lead = plan.sized(opts, capture, progress, t0, profile)
        sweep = _context(opts, db, worker, capture, progress, t0, tasks, keep_end=not held)
        run_phases(sweep, plan.ordered(opts, sweep, capture, profile, progress, whole, lead))
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


def _capture(opts: SweepOptions, worker: Worker, progress: Progress, t0: float) -> CaptureResult:
    """The worker's first compile of the workload, with Inductor's defaults, and what it found, said as it goes."""
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
    if opts.spec.device == "cpu":
        progress.note(
            f"measuring on CPU core(s) {','.join(map(str, capture.cores))} with "
            f"{opts.spec.threads or 'torch default'} thread(s)"
        )
    return capture


def _context(
    opts: SweepOptions,
    db: Database,
    worker: Worker,
    capture: CaptureResult,
    progress: Progress,
    t0: float,
    tasks: list[TaskSpec],
    keep_end: bool = True,
) -> SweepContext:
    device = DeviceInfo(**capture.device)
    device_id = db.device_id(device)
    prior = rows_for(device.kind, device.name, (device.info or {}).get("capability")) if opts.prior else PriorRows()
    if prior.files:
        where = (
            device.name
            if prior.devices == (device.name,)
            else f"{', '.join(prior.devices)} (the {device.name}'s architecture, "
            f"compute capability {device.info['capability']})"
        )
        progress.note(
            f"learning also from the measurements tuner ships for the {where} ({', '.join(prior.files)}; --no-prior: not)"
        )
    check_s = WHOLE_COMPILES * capture.later_compile_s
    deadlines = shares.deadlines(
        opts.budget.time_budget_s, t0, check_s, plan.end_compiles(opts) * capture.later_compile_s, keep_end
    )
    # The end's share holds the unfrozen measurement until the freezing phase has taken it at the start; then the phases
    # get what the end no longer needs (never less than they had: a share too small for the end went to them).
    settled = shares.deadlines(
        opts.budget.time_budget_s,
        t0,
        check_s,
        plan.end_compiles(opts, settled=True) * capture.later_compile_s,
        keep_end,
    )
    freed = max(0.0, (settled["deadline"] or 0.0) - (deadlines["deadline"] or 0.0))
    tuning = StudyContext(
        db=db,
        storage=open_storage(opts.db_url),
        device_id=device_id,
        prior=prior,
        rankers=Rankers(db, device_id, prior) if opts.ranking else None,
        environment_id=db.environment_id(EnvironmentInfo(**capture.environment)),
        device_fingerprint=device.fingerprint,
        sampler=opts.sampler,
        seed=opts.seed,
        budget=opts.budget,
        from_similar=opts.from_similar,
        costs=worker.costs,
        on_stored=progress.trial,
        **deadlines,
    )
    workload = Workload(db, opts.spec.name)
    workload.register(tasks)
    return SweepContext(
        tuning,
        worker,
        progress,
        workload,
        opts.spec.device,
        opts.spec.model,
        opts.workers,
        freezing_settled=not opts.time_unfrozen,
        freed_s=freed if plan.freezing_first(opts) else 0.0,
    ).captured(capture)


def _capture_limit(opts: SweepOptions, t0: float) -> float | None:
    """Seconds the capture may take so that a sweep with a time budget still ends when it promised, however cold the
    caches (a new environment's first compile can outlast a short budget by itself); None without a budget."""
    if opts.budget.time_budget_s is None:
        return None
    return max(1.0, t0 + shares.promised_end_s(opts.budget.time_budget_s) - CLOSING_S - time.monotonic())


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
