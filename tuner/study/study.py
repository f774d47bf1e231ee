"""One Optuna study per task, driven with ask/tell; every measurement goes to the database first.

Trial one is Inductor's default (measured before the study is asked, ``tuner.study.direct``): no winner is worse than
the baseline. A graph's knobs and fusion skip it, each trial timing the default beside it. A config measured
before (by anyone, on this device model) is never measured again: its stored result is told to the study instead.
The objective is the candidate's median over the baseline's median *timed in the same run* (drift cancels).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tuner.core import TaskOutcome
from tuner.kinds import beside_base
from tuner.db import TaskRecord, TrialRecord
from tuner.keys import config_hash
from tuner.measure.result import Measurement, Status
from tuner.study.samplers import make_sampler
from tuner.study.seeds import near_seeds
from tuner.study.direct import add_finished, study_value
from tuner.study.shared import suggest_unshared
from tuner.study.names import study_name
from tuner.search_spaces import InvalidConfig, Space

from tuner.budget.timebox import timing_kind
from tuner.study.context import Measure, MeasureMany, StudyContext, one_by_one, record
from tuner.study.settle import choose_winner, keep_for_verifying


def first_to_measure(tuning: StudyContext, task: TaskRecord, space: Space, seen: set[str]) -> list[dict[str, Any]]:
    """What a task measures before its sampler is asked, none measured before: Inductor's default, what the task's own
    capture points to (``Space.evidence``), the winners of near tasks on this device (``tuner.study.seeds``), the ranked
    candidates or else the space's seeds (``StudyContext.first_configs``) and, with ``from_similar``, other device
    models' winners (so each is measured here before it can win), each once. ``Study`` measures them without asking
    the study and adds each to it once finished (``tuner.study.direct``)."""
    near = near_seeds(task.kind, task.signature, space, _near_winners(tuning, task))
    first = [
        *([] if beside_base(task.kind) else [space.default]),
        *space.evidence(),
        *near,
        *tuning.first_configs(task, space),
    ]
    if tuning.from_similar:
        first += [c for c in tuning.db.winners_elsewhere(task.id, tuning.device_id) if space.is_valid(c)]
    hashes = [config_hash(c) for c in first]
    return [c for i, (c, h) in enumerate(zip(first, hashes)) if h not in seen and h not in hashes[:i]]


def _near_winners(tuning: StudyContext, task: TaskRecord) -> list[tuple[dict[str, Any], dict[str, Any], float | None]]:
    """Other tasks' winners of the task's kind on this device: the database's, else the shipped prior's."""
    own = tuning.db.winners_of_kind(task.kind, tuning.device_id, task.id)
    return own or (tuning.prior.winners_of_kind(task.kind, task.key) if tuning.prior is not None else [])


def enqueue_new(study: Any, params: list[dict[str, Any]]) -> None:
    """Enqueue each of ``params`` that no trial of the study has (waiting, running or done), reading the study's
    trials once: Optuna's ``skip_if_exists`` reads them again for every enqueue. Sweeps no longer enqueue
    (``tuner.study.direct``); ``bench/analysis/host_cost.py`` times this way as its baseline."""
    have = [dict(t.system_attrs.get("fixed_params", t.params)) for t in study.get_trials(deepcopy=False)]
    for p in params:
        if p not in have:
            study.enqueue_trial(p)
            have.append(p)


def tell(study: Any, ot: Any, trial: TrialRecord) -> None:
    """Tell the study a trial's result. A trial already finished (a worker that took the task over failed it as
    stale) keeps its state: the result is stored in tuner's trials all the same."""
    import optuna

    if (value := study_value(trial)) is not None:
        study.tell(ot, value, skip_if_finished=True)
    else:
        study.tell(ot, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)


def rejected(
    tuning: StudyContext,
    task: TaskRecord,
    space: Space,
    config: dict[str, Any],
    on_trial: Callable[[TrialRecord], None],
) -> TrialRecord | None:
    """``config``'s trial, stored as invalid (never measured), when its space rejects it; else None."""
    try:
        space.validate(config)
    except InvalidConfig as e:
        trial = record(tuning, task, config, Measurement(Status.INVALID, error=str(e)))
        on_trial(trial)
        return trial
    return None


def ask_new(
    tuning: StudyContext,
    task: TaskRecord,
    space: Space,
    study: Any,
    seen: set[str],
    invalid: set[str],
    on_trial: Callable[[TrialRecord], None],
) -> tuple[Any, dict[str, Any]] | None:
    """Ask the study for one config; a config measured before is told its stored result and an invalid one is
    stored as such (both return None; invalid ones also join ``invalid``); else (trial, config) to measure."""
    ot = study.ask()
    config = suggest_unshared(study, space, ot)
    if config is None:  # another worker sharing the study has it
        return None
    prev = tuning.db.find_trial(task.id, tuning.device_id, config) or rejected(tuning, task, space, config, on_trial)
    seen.add(config_hash(config))
    if prev is not None and prev.status == Status.INVALID.value:
        invalid.add(config_hash(config))
    if prev is not None:
        tell(study, ot, prev)
        return None
    return ot, config


def measured_before(tuning: StudyContext, task: TaskRecord) -> tuple[set[str], set[str]]:
    """Hashes of the task's configs tried on this device, and of those among them its space rejected."""
    trials = tuning.db.trials(task.id, tuning.device_id)
    return {config_hash(t.config) for t in trials}, {
        config_hash(t.config) for t in trials if t.status == Status.INVALID.value
    }


Pending = dict[str, tuple[dict[str, Any], list[Any]]]  # config hash -> (config, the Optuna trials that asked for it)


@dataclass
class Study:
    """One task's Optuna study: it asks new configs in batches, each measured once, tells every asking trial its result
    (:meth:`ask_batch`, :meth:`tell_batch`, :func:`run_study`) and settles the task's winner (:meth:`settle`)."""

    tuning: StudyContext
    task: TaskRecord
    space: Space
    study: Any
    seen: set[str]
    target: int
    on_trial: Callable[[TrialRecord], None]
    asks: int = 0
    invalid: set[str] = field(default_factory=set)  # configs the space rejected: they cost no measurement
    queue: list[dict[str, Any]] = field(default_factory=list)  # measured before the study is asked (tuner.study.direct)

    def open(self) -> bool:
        size = self.space.size() or 10**9
        return len(self.seen - self.invalid) < min(self.target, size) and self.asks < 4 * self.target

    def refresh(self) -> None:
        """Count what other workers sharing this study have measured since."""
        seen, invalid = measured_before(self.tuning, self.task)
        self.seen |= seen
        self.invalid |= invalid

    def ask_batch(self, batch: int) -> Pending:
        if self.asks:  # a first batch counts what the study was made with, just read from the database
            self.refresh()
        pending: Pending = {}
        while len(pending) < batch and self.open():
            self.asks += 1
            fresh = (
                self._direct()
                if self.queue
                else ask_new(self.tuning, self.task, self.space, self.study, self.seen, self.invalid, self.on_trial)
            )
            if fresh is not None:
                ot, config = fresh
                pending.setdefault(config_hash(config), (config, []))[1].append(ot)  # the sampler may repeat itself
        return pending

    def _direct(self) -> tuple[None, dict[str, Any]] | None:
        """The queue's next config not measured yet (an invalid one is stored as such): no Optuna trial asked it."""
        config = self.queue.pop(0)
        h = config_hash(config)
        if h in self.seen:
            return None
        self.seen.add(h)
        if rejected(self.tuning, self.task, self.space, config, self.on_trial) is not None:
            self.invalid.add(h)
            return None
        return None, config

    def settle(self, measure: Measure) -> TaskOutcome:
        """Re-measure the best candidate against the default and store the winner (``settle.choose_winner``)."""
        return choose_winner(self.tuning, self.task, self.space, measure)

    def drop(self, pending: Pending) -> None:
        """Leave ``pending`` unmeasured (its site does not exist under this compile's forcing): the trials that asked
        for it fail, nothing is stored, and the study asks no more."""
        import optuna

        for _, ots in pending.values():
            for ot in ots:
                if ot is not None:
                    self.study.tell(ot, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
        self.target = 0

    def tell_batch(self, pending: Pending, results: list[Measurement]) -> None:
        for (config, ots), m in zip(pending.values(), results):
            rec = record(self.tuning, self.task, config, m)
            self.on_trial(rec)
            for ot in ots:
                tell(self.study, ot, rec) if ot is not None else add_finished(self.study, self.space, config, rec)


def open_study(tuning: StudyContext, task: TaskRecord, space: Space, *, join: bool = False) -> Any:
    """The task's Optuna study (resumed when it exists). Its holder fails the running trials a killed run left;
    ``join`` (another worker holds the task and is tuning it now) leaves them (they are the holder's) and samples
    with a seed of its own, so it does not retrace the holder's steps."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    study = optuna.create_study(
        study_name=study_name(tuning, task),
        storage=tuning.storage,
        sampler=make_sampler(tuning.sampler, space, tuning.seed + (1 + os.getpid() % 9973 if join else 0)),
        direction="minimize",
        load_if_exists=True,
    )
    for stale in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)) if not join else ():
        study.tell(stale.number, state=optuna.trial.TrialState.FAIL)  # left by a killed run
    return study


def run_study(
    tuning: StudyContext,
    task: TaskRecord,
    space: Space,
    measure: Measure | MeasureMany,
    on_trial: Callable[[TrialRecord], None] = lambda t: None,
    batch: int = 1,
    target: int | None = None,
    join: bool = False,
) -> int:
    """Measure up to ``budget.trials`` distinct configs for ``task`` (counting earlier runs and other workers'
    trials in the same study), ``batch`` at a time (``measure`` then takes a list of configs). ``join``: another
    worker holds the task; this one helps. Returns how many this call measured."""
    seen, invalid = measured_before(tuning, task)
    asker = Study(
        tuning,
        task,
        space,
        None,
        seen,
        tuning.target(task.kind, target or tuning.budget.trials),
        on_trial,
        invalid=invalid,
    )
    if not asker.open():
        return 0
    many: MeasureMany = measure if batch > 1 else one_by_one(measure)  # type: ignore[assignment,arg-type]
    asker.study = open_study(tuning, task, space, join=join)
    asker.queue = [] if join else first_to_measure(tuning, task, space, seen)
    measured = 0
    while asker.open() and tuning.fits(space.family, reserve_s=keep_for_verifying(tuning, task, space)):
        pending = asker.ask_batch(batch)
        if not pending:
            continue
        configs = [c for c, _ in pending.values()]
        with tuning.costs.timed(space.family):
            results = many(configs, tuning.budget.rounds)
        for m in results:
            if (
                m.timing_s is not None
            ):  # a whole-workload trial: what re-timing its compiles would cost (``can_verify``)
                tuning.costs.observe(timing_kind(space.family), m.timing_s)
        asker.tell_batch(pending, results)
        measured += len(configs)
    return measured
