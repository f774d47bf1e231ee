"""The sweep driver: capture → tasks → one study per task → verified winners → whole-workload check."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tuner.backend.forcing import SITE_KIND, Forcing
from tuner.budget import Budget
from tuner.db import Database, DeviceInfo, EnvironmentInfo
from tuner.measure import Measurement, TrialRequest, Worker
from tuner.db.claims import claim_next, finish, pending, renew, worker_id
from tuner.search import Measure, StudyContext, TaskOutcome, choose_winner, open_storage, run_study
from tuner.settings import settings
from tuner.tasks import TaskSpec, tasks_from_capture
from tuner.workload import WorkloadSpec


@dataclass(frozen=True)
class SweepOptions:
    spec: WorkloadSpec
    budget: Budget
    db_url: str
    sampler: str = "tpe"
    seed: int = 0
    from_similar: bool = False


@dataclass
class SweepReport:
    workload: str
    device: str
    graph_breaks: dict[str, int]
    capture_compile_s: float
    eager_ms: float | None
    outcomes: list[TaskOutcome] = field(default_factory=list)
    default_ms: float | None = None
    tuned_ms: float | None = None
    interrupted: bool = False
    wall_s: float = 0.0
    trials_measured: int = 0

    @property
    def speedup(self) -> float | None:
        return self.default_ms / self.tuned_ms if self.default_ms and self.tuned_ms else None


class Progress:
    """What the driver tells whoever watches (the CLI draws a progress bar)."""

    def start(self, total: int, tasks: list[TaskSpec]) -> None: ...
    def task(self, task: TaskSpec) -> None: ...
    def trial(self, status: str) -> None: ...
    def note(self, text: str) -> None: ...


def run_sweep(opts: SweepOptions, progress: Progress | None = None) -> SweepReport:
    """Tune every task of the workload. Every trial is committed as it is measured, so an interrupt
    (``KeyboardInterrupt``) loses at most the trial in flight; the partial report is marked interrupted."""
    progress = progress or Progress()
    t0 = time.monotonic()
    deadline = t0 + opts.budget.time_budget_s if opts.budget.time_budget_s else None
    db = Database.open(opts.db_url)
    worker = Worker(opts.spec, settings().cache_dir / "logs", trial_timeout_s=opts.budget.trial_timeout_s)
    report: SweepReport | None = None
    try:
        progress.note(f"capturing {opts.spec.name} (compiling with Inductor's defaults)")
        capture = worker.start()
        device = DeviceInfo(**capture.device)
        ctx = StudyContext(
            db=db,
            storage=open_storage(opts.db_url),
            device_id=db.device_id(device),
            environment_id=db.environment_id(EnvironmentInfo(**capture.environment)),
            device_fingerprint=device.fingerprint,
            sampler=opts.sampler,
            seed=opts.seed,
            budget=opts.budget,
            deadline=deadline,
            from_similar=opts.from_similar,
        )
        report = SweepReport(opts.spec.name, device.name, capture.graph_breaks, capture.compile_s, capture.eager_ms)
        tasks = tasks_from_capture(capture, opts.spec.model)
        records = [db.upsert_task(t.key, t.kind, t.name, t.signature, t.space.fingerprint()) for t in tasks]
        db.link_workload(opts.spec.name, [r.id for r in records])
        progress.start(sum(min(opts.budget.trials, t.space.size() or opts.budget.trials) for t in tasks), tasks)

        def measure_for(task: TaskSpec, base: Forcing) -> Measure:
            return lambda config, rounds: worker.measure(trial_request(task, config, base, rounds, opts.budget.min_sample_ms))

        outcomes, measured = tune_tasks(ctx, tasks, records, measure_for, progress)
        mine = {o.task.id: o for o in outcomes}
        for t, r in zip(tasks, records):  # in task order; tasks another worker (or an earlier run) finished too
            outcome = mine.get(r.id) or _stored_outcome(db, ctx, r, t)
            if outcome is not None:
                report.outcomes.append(outcome)
        report.trials_measured += measured
        forced = winners_forcing(db, tasks, records, ctx.device_id)
        if not ctx.time_left():
            progress.note("time budget reached; unfinished tasks keep Inductor's defaults")
        others = pending(db, [r.id for r in records], ctx.device_id, opts.budget.trials)
        if others:
            progress.note(f"{others} task(s) still being tuned by other workers")

        if any(not o.is_default for o in report.outcomes):
            progress.note("measuring the whole workload: all winners vs Inductor's defaults")
            m = worker.measure(TrialRequest({}, forced.to_json(), opts.budget.verify_rounds, opts.budget.min_sample_ms))
            if m.ok:
                report.default_ms, report.tuned_ms = m.baseline_ms, m.median_ms
        else:
            best = [o.default_ms for o in report.outcomes if o.default_ms]
            report.default_ms = report.tuned_ms = best[-1] if best else None
    except KeyboardInterrupt:
        if report is not None:
            report.interrupted = True
        else:
            raise
    finally:
        worker.close()
        db.close()
        if report is not None:
            report.wall_s = time.monotonic() - t0
    assert report is not None
    return report


def winners_forcing(db: Database, tasks: list[TaskSpec], records: list[Any], device_id: int, before: int | None = None) -> Forcing:
    """The stored winners of the workload's tasks (of those before task id ``before`` in order, when given)."""
    forced = Forcing()
    for t, r in zip(tasks, records):
        if before is not None and r.id == before:
            break
        config = db.winner_config(r.id, device_id)
        if config is not None and t.space.is_valid(config):
            forced = forced.merged(t.forcing(config))
    return forced


def tune_tasks(
    ctx: StudyContext,
    tasks: list[TaskSpec],
    records: list[Any],
    measure_for: Callable[[TaskSpec, Forcing], Measure],
    progress: Progress | None = None,
) -> tuple[list[TaskOutcome], int]:
    """Claim tasks one at a time (in order) until none is left for this worker; tune each and store its winner.
    Any number of these loops, in any processes on any machines, can share one database."""
    progress = progress or Progress()
    db, wid = ctx.db, worker_id()
    ttl = ctx.budget.trial_timeout_s + 300.0
    by_id = {r.id: (t, r) for t, r in zip(tasks, records)}
    ids = [r.id for r in records]
    outcomes: list[TaskOutcome] = []
    measured_total = 0
    while ctx.time_left():
        tid = claim_next(db, ids, ctx.device_id, wid, ctx.budget.trials, ttl)
        if tid is None:
            break
        spec_t, rec = by_id[tid]
        progress.task(spec_t)
        measure = measure_for(spec_t, winners_forcing(db, tasks, records, ctx.device_id, before=tid))

        def on_trial(t: Any, _tid: int = tid) -> None:
            progress.trial(t.status)
            renew(db, _tid, ctx.device_id, wid, ttl)

        measured = run_study(ctx, rec, spec_t.space, measure, on_trial=on_trial)
        measured_total += measured
        stored = _stored_outcome(db, ctx, rec, spec_t) if measured == 0 else None
        outcomes.append(stored or dataclasses.replace(choose_winner(ctx, rec, spec_t.space, measure), measured=measured))
        finish(db, tid, ctx.device_id, wid, ctx.budget.trials)
    return outcomes, measured_total


def trial_request(task: TaskSpec, config: dict[str, Any], base: Forcing, rounds: int, min_sample_ms: float) -> TrialRequest:
    """Graph tasks: the whole workload, candidate vs baseline, interleaved. Template sites: at the kernel, the
    candidate choice vs the default choice side by side (the default itself is timed beside another choice)."""
    if task.kind != SITE_KIND:
        return TrialRequest(base.to_json(), base.merged(task.forcing(config)).to_json(), rounds, min_sample_ms)
    default, cand = task.space.default["choice"], config["choice"]
    if cand == default:  # Inductor benchmarks a site only with two or more choices: time the default beside another
        cand = next(c for c in task.signature["space"]["choices"] if c != default)
        choices = (default, cand, default)
    else:
        choices = (default, cand)
    return TrialRequest(base.to_json(), base.to_json(), rounds, min_sample_ms, site=task.key, choices=choices)


def _stored_outcome(db: Database, ctx: StudyContext, rec: Any, task: TaskSpec) -> TaskOutcome | None:
    """The task's stored winner for this device, if it has one that is still valid in its space."""
    winner = db.winner_config(rec.id, ctx.device_id)
    if winner is None or not task.space.is_valid(winner):
        return None
    trials = db.trials(rec.id, ctx.device_id)
    ok = [t for t in trials if t.status == "ok"]
    match = [t for t in ok if t.config == winner]
    best = match[-1] if match else None
    is_default = winner == task.space.default
    default_ms = best.baseline_ms if best else None
    return TaskOutcome(rec, winner, is_default, default_ms, best.median_ms if best else None, 0, len(trials))
