"""The sweep driver: capture → tasks → one study per task → verified winners → whole-workload check."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tuner.backend.forcing import GRAPH_KINDS, SITE_KIND, Forcing
from tuner.budget import Budget
from tuner.db import Database, DeviceInfo, EnvironmentInfo
from tuner.measure import Measurement, TrialRequest, Worker
from tuner.claimed import tune_site_groups, tune_tasks, wait_for_others
from tuner.db.claims import held_by_others, release_all, worker_id
from tuner.progress import Progress
from tuner.search import Measure, MeasureMany, StudyContext, TaskOutcome, open_storage
from tuner.settings import settings
from tuner.site_rounds import site_target
from tuner.tasks import TaskSpec, fusion_tasks, kernel_tasks, tasks_from_capture
from tuner.winners import revert_to_defaults, stored_outcome, winner_parts, winners_forcing
from tuner.workload_check import KINDS, check_whole
from tuner.workload import WorkloadSpec


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
    whole_checked: bool = False  # this worker measured all winners together (the last worker to finish does)

    @property
    def speedup(self) -> float | None:
        return self.default_ms / self.tuned_ms if self.default_ms and self.tuned_ms else None


SITE_BATCH = {"cuda": 16, "cpu": 3}  # choices per site per round (a round is one compile)
KERNEL_BATCH = 8  # Triton configs compiled in parallel, then timed one at a time


def run_sweep(opts: SweepOptions, progress: Progress | None = None) -> SweepReport:
    """Tune every task of the workload: template sites (in rounds), then on CUDA the Triton kernels of the graph
    those winners produce, then graph-level knobs. Every trial is committed as it is measured, so an interrupt
    (``KeyboardInterrupt``) loses at most the trial in flight; the partial report is marked interrupted."""
    progress = progress or Progress()
    t0 = time.monotonic()
    deadline = t0 + opts.budget.time_budget_s if opts.budget.time_budget_s else None
    db = Database.open(opts.db_url)
    recycle = 12 if opts.spec.device == "cpu" else 10**6  # a CUDA worker's restart recompiles the model twice
    worker = Worker(opts.spec, settings().cache_dir / "logs", trial_timeout_s=opts.budget.trial_timeout_s, recycle_after=recycle)
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
        sites = [(t, r) for t, r in zip(tasks, records) if t.kind == SITE_KIND]
        graphs = [(t, r) for t, r in zip(tasks, records) if t.kind != SITE_KIND]
        outcomes: dict[int, TaskOutcome] = {}

        # 1. Template sites, in rounds (one compile benchmarks a batch of choices at every site).
        if sites:
            progress.start(_planned(lambda t: site_target(opts.budget.site_target, t), [t for t, _ in sites]), [t.name for t, _ in sites])
            if opts.spec.device == "cuda" and settings().site_timing == "cudagraph":
                progress.note("template-site choices are timed as CUDA-graph replays (TUNER_SITE_TIMING=cudagraph, experimental)")
            base = winners_forcing(db, [t for t, _ in sites], [r for _, r in sites], ctx.device_id)

            def measure_round(request: dict[str, tuple[str, ...]], rounds: int) -> Any:
                return worker.measure(TrialRequest({}, base.to_json(), rounds, opts.budget.min_sample_ms, sites=request))

            got, measured = tune_site_groups(
                within(ctx, PHASE_SHARE["sites"]), sites, measure_round, SITE_BATCH.get(opts.spec.device, 3), opts.workers, progress
            )
            outcomes.update(got)
            report.trials_measured += measured
            wait_for_others(db, ctx, [r.id for _, r in sites], progress)

        def register(new: list[TaskSpec]) -> list[Any]:
            """Store new tasks and link them to the workload; they join the report in this order."""
            nonlocal tasks, records
            recs = [db.upsert_task(t.key, t.kind, t.name, t.signature, t.space.fingerprint()) for t in new]
            tasks, records = tasks + new, records + recs
            db.link_workload(opts.spec.name, [r.id for r in records])
            return recs

        def tune_kernels(forcing: Forcing, why: str, share: float) -> None:
            """Capture the Triton kernels of the graphs compiled under ``forcing``; tune those not seen before.
            Each new kernel first gets the config Inductor chose for it as its stored answer, so a kernel the
            time budget leaves untuned is still forced at compile time (never autotuned there)."""
            progress.note(f"capturing the Triton kernels ({why})")
            known = {t.key for t in tasks}
            kernels = [t for t in kernel_tasks(worker.capture_kernels(forcing.to_json())) if t.key not in known]
            if not kernels:
                return
            krecords = register(kernels)
            for t, r in zip(kernels, krecords):
                if db.winner_config(r.id, ctx.device_id) is None:
                    db.set_winner(r.id, ctx.device_id, None, t.space.default, None, t.signature.get("default_ms"))
            progress.start(_planned(opts.budget.trials, kernels), [t.name for t in kernels])

            def kernel_measure(task: TaskSpec, _base: Forcing) -> MeasureMany:
                return lambda configs, rounds: measure_kernel(worker, task, configs, rounds)

            got, measured = tune_tasks(within(ctx, share), kernels, krecords, kernel_measure, progress, batch=KERNEL_BATCH)
            outcomes.update({o.task.id: o for o in got})
            report.trials_measured += measured

        # 2. CUDA: the Triton kernels of the graph that the template winners produce. Captured even past the time
        #    budget (like verification): each keeps Inductor's config as its answer, so a compile never autotunes.
        if opts.spec.device == "cuda":
            share = PHASE_SHARE["kernels"] if opts.fusion else 1.0
            tune_kernels(winners_forcing(db, tasks, records, ctx.device_id), "compiling with the template winners forced", share)

        # 3. Graph-level knobs, with every earlier winner forced.
        if graphs and ctx.time_left():
            progress.start(_planned(opts.budget.trials, [t for t, _ in graphs]), [t.name for t, _ in graphs])
            site_forcing = winners_forcing(db, [t for t, _ in sites], [r for _, r in sites], ctx.device_id)

            def measure_for(task: TaskSpec, base: Forcing) -> Measure:
                both = site_forcing.merged(base)
                return lambda config, rounds: worker.measure(trial_request(task, config, both, rounds, opts.budget.min_sample_ms))

            share = PHASE_SHARE["graphs"] if opts.fusion else 1.0
            got_g, measured = tune_tasks(within(ctx, share), [t for t, _ in graphs], [r for _, r in graphs], measure_for, progress, join=True)
            outcomes.update({o.task.id: o for o in got_g})
            report.trials_measured += measured

        # 4. Fusion groupings per graph, measured end to end with every winner so far forced; then on CUDA the
        #    kernels whose source a winning grouping changed (new keys) are tuned like the others.
        if opts.fusion and ctx.time_left():
            everything = winners_forcing(db, tasks, records, ctx.device_id)
            progress.note("recording the fusions Inductor makes with the winners so far forced")
            groupings = fusion_tasks(worker.capture_graphs(everything.to_json()), opts.spec.model)
            frecords = register(groupings)
            progress.start(_planned(opts.budget.site_target, groupings), [t.name for t in groupings])

            def fusion_measure_for(task: TaskSpec, base: Forcing) -> Measure:
                both = everything.merged(base)
                return lambda config, rounds: worker.measure(trial_request(task, config, both, rounds, opts.budget.min_sample_ms))

            fctx = within(ctx, PHASE_SHARE["fusion"] if opts.spec.device == "cuda" else 1.0)
            got_f, measured = tune_tasks(fctx, groupings, frecords, fusion_measure_for, progress, target=opts.budget.site_target, join=True)
            outcomes.update({o.task.id: o for o in got_f})
            report.trials_measured += measured
            if opts.spec.device == "cuda" and any(not o.is_default for o in got_f) and ctx.time_left():
                tune_kernels(winners_forcing(db, tasks, records, ctx.device_id), "of the winning fusion groupings", 1.0)

        for t, r in zip(tasks, records):  # in task order; tasks another worker (or an earlier run) finished too
            outcome = outcomes.get(r.id) or stored_outcome(db, ctx, r, t)
            if outcome is not None:
                report.outcomes.append(outcome)
        if not ctx.time_left():
            progress.note("time budget reached: unfinished tasks keep their best so far or Inductor's defaults; rerun to continue them")
        busy = held_by_others(db, [r.id for r in records], ctx.device_id, worker_id())
        if busy:
            progress.note(f"{len(busy)} task(s) still being tuned by other workers: the last one to finish checks the whole workload")
        elif any(not o.is_default for o in report.outcomes):
            progress.note("measuring the whole workload: all winners vs Inductor's defaults")
            parts = {
                name: winner_parts(db, [(t, r) for t, r in zip(tasks, records) if t.kind in kinds], ctx.device_id, defaults=False)
                for name, kinds in KINDS.items()
            }

            def measure_whole(f: Forcing) -> Measurement:
                return worker.measure(TrialRequest({}, f.to_json(), opts.budget.verify_rounds, opts.budget.min_sample_ms))

            m, dropped = check_whole(measure_whole, parts, opts.budget.min_gain, progress.note)
            report.whole_checked = True
            if m.ok:
                report.default_ms, report.tuned_ms = m.baseline_ms, m.median_ms
            else:
                progress.note(f"the whole-workload check failed: {m.status.value}: {m.error}")
            drop = set(dropped)
            reverted = revert_to_defaults(db, ctx.device_id, [(t, r) for t, r in zip(tasks, records) if r.id in drop])
            if reverted:
                names = [t.name for t, r in zip(tasks, records) if r.id in reverted]
                shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
                progress.note(f"{len(reverted)} winner(s) went back to Inductor's defaults, as the workload was slower with them: {shown}")
                report.outcomes = [o.reverted(reverted[o.task.id]) if o.task.id in reverted else o for o in report.outcomes]
            if reverted and opts.spec.device == "cuda":  # the kept set compiles to other kernels: store their configs too
                tune_kernels(winners_forcing(db, tasks, records, ctx.device_id), "of the set the whole-workload check kept", 1.0)
        else:
            best = [o.default_ms for o in report.outcomes if o.default_ms and o.task.kind in GRAPH_KINDS]
            report.default_ms = report.tuned_ms = best[-1] if best else None
    except KeyboardInterrupt:
        release_all(db, worker_id())
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


# With a time budget, each phase gets this share of the time still left when it starts (what a phase leaves
# unused flows to the next): template sites, then CUDA kernels or CPU graph knobs, then fusion groupings (on CUDA
# the kernels those create get the rest). Without a share, the first phase could take the whole budget.
PHASE_SHARE = {"sites": 0.4, "kernels": 0.6, "graphs": 0.5, "fusion": 0.7}


def within(ctx: StudyContext, share: float) -> StudyContext:
    """``ctx`` with a deadline ``share`` of the way from now to its own (unchanged without a time budget)."""
    if ctx.deadline is None:
        return ctx
    now = time.monotonic()
    return dataclasses.replace(ctx, deadline=now + share * max(0.0, ctx.deadline - now))


def _planned(target: int | Callable[[TaskSpec], int], tasks: list[TaskSpec]) -> int:
    """The trials a phase plans: each task's target (a number, or one per task), capped by its space's size."""
    per = target if callable(target) else (lambda t: target)
    return sum(min(per(t), t.space.size() or per(t)) for t in tasks)


def measure_kernel(worker: Worker, task: TaskSpec, configs: list[dict[str, Any]], rounds: int) -> list[Measurement]:
    """A batch of one kernel's configs; if the worker dies on the batch, each config again alone, so only
    the config that kills it is stored as ``worker_died``."""
    req = TrialRequest({}, {}, rounds, kernel=task.key, configs=tuple(configs))
    res = worker.measure(req)
    if isinstance(res, list):
        return res
    if len(configs) == 1:
        return [res]
    out = []
    for c in configs:
        r = worker.measure(dataclasses.replace(req, configs=(c,)))
        out.append(r[0] if isinstance(r, list) else r)
    return out


def trial_request(task: TaskSpec, config: dict[str, Any], base: Forcing, rounds: int, min_sample_ms: float) -> TrialRequest:
    """Graph tasks: the whole workload, candidate vs baseline, interleaved."""
    return TrialRequest(base.to_json(), base.merged(task.forcing(config)).to_json(), rounds, min_sample_ms)


