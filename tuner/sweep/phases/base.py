"""What every sweep phase shares: the sweep's context (database, worker, the workload's tasks, the outcomes so far)
and the phase contract. A phase plans (finds its tasks, says what they will cost), then runs until its deadline."""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tuner.budget import clock, timebox
from tuner.budget.clock import CAPTURE, fits
from tuner.core import Forcing, Kind, TaskOutcome, TaskSpec
from tuner.db import Database, TaskRecord
from tuner.keys import digest
from tuner.budget.estimate import expected_s
from tuner.sweep.epilogues import Epilogue, site_epilogues
from tuner.sweep.profile import epilogue_device_ms, epilogue_ms, short_launches
from tuner.measure import CaptureGraphs, Recording, Worker
from tuner.sweep.progress import Progress
from tuner.study.context import StudyContext
from tuner.sweep.winners import StoredWinners


def as_stored(task: TaskSpec, record: TaskRecord) -> TaskSpec:
    """``task`` with the signature its database record holds: a task stored before its space grew (a knob added since)
    is searched in the space it was stored with, in which a compile validates its winners; a record that builds no
    space leaves ``task`` as found."""
    from tuner.search_spaces import InvalidConfig, space_for

    if record.signature == task.signature or not isinstance(record.signature, dict):
        return task
    try:
        return dataclasses.replace(task, signature=record.signature, space=space_for(task.kind, record.signature))
    except InvalidConfig:
        return task


@dataclass
class Workload:
    """The workload's tasks in order, each with its database record; new tasks are stored and linked as found."""

    db: Database
    name: str
    tasks: list[TaskSpec] = field(default_factory=list)
    records: list[TaskRecord] = field(default_factory=list)

    def register(self, new: list[TaskSpec]) -> list[TaskRecord]:
        """``new``'s records, in order; a task registered before is not added again."""
        return [r for _, r in self.register_pairs(new)]

    def register_pairs(self, new: list[TaskSpec]) -> list[tuple[TaskSpec, TaskRecord]]:
        """``new``'s (task, record) pairs, in order, each task as its record holds it (:func:`as_stored`)."""
        known = {t.key: r for t, r in zip(self.tasks, self.records)}
        recs = [
            known.get(t.key) or self.db.upsert_task(t.key, t.kind, t.name, t.signature, t.space.fingerprint())
            for t in new
        ]
        pairs = [(as_stored(t, r), r) for t, r in zip(new, recs)]
        added = [(t, r) for t, r in pairs if t.key not in known]
        self.tasks, self.records = self.tasks + [t for t, _ in added], self.records + [r for _, r in added]
        self.db.link_workload(self.name, [r.id for r in self.records])
        return pairs

    def pairs(self, kinds: tuple[Kind, ...] | None = None) -> list[tuple[TaskSpec, TaskRecord]]:
        return [(t, r) for t, r in zip(self.tasks, self.records) if kinds is None or t.kind in kinds]

    @property
    def keys(self) -> set[str]:
        return {t.key for t in self.tasks}


@dataclass
class SweepContext:
    """One sweep, as every phase sees it."""

    tuning: StudyContext  # database, Optuna storage, device, sampler, budget, the whole sweep's deadline
    worker: Worker
    progress: Progress
    workload: Workload
    device_type: str
    model: str
    workers: int = 1  # local workers sharing the sweep
    outcomes: dict[int, TaskOutcome] = field(default_factory=dict)
    recorded: list[dict[str, Any]] = field(
        default_factory=list
    )  # the graphs as the capture recorded them (Inductor's defaults)
    short_kernels: int = (
        0  # the step's Triton launches, where it is a run of short kernels (``tuner.sweep.profile.short_launches``)
    )
    epilogue_ms: float = (
        0.0  # what a pointwise kernel of the step costs (``tuner.sweep.profile.epilogue_ms``): a site's epilogue credit
    )
    epilogue_device_ms: float | None = (
        None  # ... inside the step, on the device (``tuner.sweep.profile.epilogue_device_ms``)
    )
    kernels: list[dict[str, Any]] = field(
        default_factory=list
    )  # the capture's Triton kernels (names, launches, default times)
    epilogues: dict[str, Epilogue] = field(
        default_factory=dict
    )  # {site key: the kernel that runs its epilogue} (``epilogues``)
    fused_epilogues: set[str] = field(
        default_factory=set
    )  # the sites whose epilogue a capture with the winners forced showed taken in
    capture_s: float = 0.0  # what the capture took, start to end
    former: list[TaskRecord] = field(default_factory=list)  # the tasks of a workload captured before this one (frozen)
    freezing_settled: bool = (
        False  # whether the end leaves freezing as it is: timed before the searches (``FreezingPhase``), or not to be
    )
    unfrozen_ratio: float | None = None  # where it won unfrozen: its time over the frozen one's
    freed_s: float = (
        0.0  # how much later the phases' deadline moves once freezing is settled (the end no longer holds it)
    )
    recordings: dict[str, Recording] = field(
        default_factory=dict
    )  # {forcing's digest: what a compile under it recorded}

    @property
    def db(self) -> Database:
        return self.tuning.db

    @property
    def budget(self) -> Any:
        return self.tuning.budget

    def winners(self) -> StoredWinners:
        """One read of the stored winners of every task of the workload."""
        return StoredWinners.read(self.db, [r.id for r in self.workload.records], self.tuning.device_id)

    def add(self, outcomes: list[TaskOutcome]) -> None:
        self.outcomes.update({o.task.id: o for o in outcomes})

    def time_left(self) -> bool:
        return self.tuning.time_left()

    def settle_freezing(self) -> None:
        """Freezing is settled before the searches: the end will not time it, and its time goes to the phases."""
        self.freezing_settled = True
        if self.freed_s and self.tuning.deadline is not None:
            self.tuning = dataclasses.replace(self.tuning, deadline=self.tuning.deadline + self.freed_s)
        self.freed_s = 0.0

    def replace_workload(self, workload: Workload, former: list[TaskRecord], capture: Any = None) -> None:
        """The sweep goes on with ``workload`` (captured by ``capture``, where there was one); the tasks of the one
        before (``former``) stay in its report."""
        self.workload, self.former = workload, self.former + former
        if capture is not None:
            self.captured(capture)

    def captured(self, capture: Any) -> SweepContext:
        """What the phases read of ``capture`` (a ``CaptureResult``): its graphs, kernels, epilogues and cost."""
        self.recorded, self.short_kernels, self.capture_s = (
            capture.graphs,
            short_launches(capture),
            sum(capture.costs.values()),
        )
        self.epilogue_ms, self.epilogue_device_ms = epilogue_ms(capture), epilogue_device_ms(capture)
        self.kernels, self.epilogues = capture.kernels, site_epilogues(capture.sites, capture.kernels)
        return self

    def can_capture(self, keep_end: bool = False) -> bool:
        """Whether one more capture compile (its recent cost) ends by the sweep's own deadline; with ``keep_end``, by
        the phases' deadline, so the time kept for the whole-workload check stays whole."""
        end = self.tuning.deadline if keep_end else self.tuning.settle_by
        return fits(end, self.tuning.costs.expect(CAPTURE))

    def record(self, forcing: Forcing) -> Recording:
        """The graphs and template sites a recording compile under ``forcing`` meets (``CaptureGraphs``): compiled
        once per forcing, so the phases that ask under the same winners share one compile."""
        key = digest(forcing.to_json())
        if key not in self.recordings:
            self.recordings[key] = self.worker.run(CaptureGraphs(forcing.to_json()))
        return self.recordings[key]

    def keep_recording(self, forcing: Forcing, recording: Recording) -> None:
        """Hold ``recording``, made by a compile under ``forcing`` that also did other work (a site batch)."""
        self.recordings.setdefault(digest(forcing.to_json()), recording)

    def recorded_under(self, forcing: Forcing) -> bool:
        """Whether :meth:`record` holds ``forcing``'s recording already (it then costs no compile)."""
        return digest(forcing.to_json()) in self.recordings

    def until(self, deadline: float | None) -> StudyContext:
        """The tuning context with a phase's deadline."""
        return dataclasses.replace(self.tuning, deadline=deadline)


@dataclass(frozen=True)
class Plan:
    """What a phase is about to do: its tasks and the trials it plans for them (its estimated cost). ``due``: the
    phase runs although it tunes no task of its own (the whole-workload check); by default it runs when it has tasks."""

    tasks: list[TaskSpec]
    trials: int
    cost: list[tuple[str, int]] = field(default_factory=list)  # (cost kind, trials) pairs, for the expected time
    due: bool | None = None
    seconds: float | None = None  # the expected time, where the phase knows it better than its trials' cost

    def expected_s(self, costs: Any, device_type: str) -> float:
        return self.seconds if self.seconds is not None else expected_s(costs, device_type, self.cost)

    def __bool__(self) -> bool:
        return bool(self.tasks) if self.due is None else self.due


class Phase(abc.ABC):
    """A step of the sweep. ``share``: the fraction of the time left when it starts that it may use (what it leaves
    unused flows to the next). ``past_budget``: it still runs when the time budget is spent (its work keeps a
    compile from autotuning, or settles what was measured)."""

    name: str = "phase"
    share: float = 1.0
    past_budget: bool = False
    compiles: float = 0.0  # the least time worth giving it, in compiles of the workload (see deadline_for)
    whole_step: bool = (
        False  # each trial times the whole workload against its base (a winner beats the step by min_gain)
    )
    lender: Any = None  # the phase whose time kept for the end this one may take where that phase has nothing to do

    @abc.abstractmethod
    def plan(self, sweep: SweepContext) -> Plan:
        """Find this phase's tasks (registering new ones) and what they will cost; an empty plan skips the phase."""

    @abc.abstractmethod
    def run(self, sweep: SweepContext, deadline: float | None) -> None:
        """Tune the planned tasks until ``deadline`` (None: no time budget); outcomes go to ``sweep``."""


def deadline_for(sweep: SweepContext, share: float, compiles: float = 0.0) -> float | None:
    """The deadline of a phase that takes ``share`` of the time left, but at least ``compiles`` compiles
    (``tuner.budget.timebox.deadline_for``)."""
    return timebox.deadline_for(sweep.tuning.deadline, share, compiles, sweep.tuning.costs.expect(CAPTURE))


def planned(target: int | Callable[[TaskSpec], int], tasks: list[TaskSpec]) -> int:
    """The trials a phase plans: each task's target (a number, or one per task), capped by its space's size."""
    per = target if callable(target) else (lambda t: target)
    return sum(min(per(t), t.space.size() or per(t)) for t in tasks)


def run_phases(sweep: SweepContext, phases: Iterator[Phase]) -> None:
    """The driver: plan each phase, show its plan, run it with its deadline; skip it once the budget is spent."""
    for phase in phases:
        if not (phase.past_budget or sweep.time_left()):
            continue
        plan = phase.plan(sweep)
        if not plan:
            continue
        if phase.lender is not None:
            phase.lender.lend(sweep, phase.name)
        deadline = deadline_for(sweep, phase.share, phase.compiles)
        if plan.tasks:
            sweep.progress.start(plan.trials, [t.name for t in plan.tasks])
            sweep.progress.note(_plan_line(sweep, phase, plan, deadline))
        phase.run(sweep, deadline)


def _plan_line(sweep: SweepContext, phase: Phase, plan: Plan, deadline: float | None) -> str:
    """What a phase is about to do: its tasks, trials and expected time (and its deadline, with a time budget)."""
    line = f"{phase.name}: {len(plan.tasks)} tasks, up to {plan.trials} trials"
    if plan.cost or plan.seconds is not None:
        line += f", expected ~{plan.expected_s(sweep.tuning.costs, sweep.device_type):.0f} s"
    if deadline is not None:
        line += f"; its deadline is in {max(0.0, deadline - clock.now()):.0f} s"
    return line
