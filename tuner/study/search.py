"""One Optuna study per task, driven with ask/tell; every measurement goes to the database first.

Trial one is Inductor's default (measured before the study is asked, ``tuner.study.direct``): no winner is worse than
the baseline. A graph's knobs and fusion skip it, each trial timing the default beside it. A config measured
before (by anyone, on this device model) is never measured again: its stored result is told to the study instead.
The objective is the candidate's median over the baseline's median *timed in the same run* (drift cancels).
"""

from __future__ import annotations

import os
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from tuner.sweep.budget import Budget
from tuner.sweep.clock import CAPTURE, Costs, fits
from tuner.core import TaskOutcome
from tuner.kinds import beside_base
from tuner.db import Database, TaskRecord, TrialRecord
from tuner.keys import config_hash
from tuner.measure.result import Measurement, Status
from tuner.study.samplers import make_sampler
from tuner.study.seeds import near_seeds
from tuner.study.direct import add_finished, study_value
from tuner.study.shared import suggest_unshared
from tuner.study.names import annotate_study, study_name
from tuner.search_spaces import InvalidConfig, Space

FIRST_GRAPH_TRIAL_COMPILES = 2  # the first such trial compiles its baseline (the winners so far) and its candidate
Measure = Callable[[dict[str, Any], int], Measurement]  # (config, rounds) -> measurement
MeasureMany = Callable[[list[dict[str, Any]], int], list[Measurement]]  # several configs at once (compiled in parallel)


def one_by_one(measure: Measure) -> MeasureMany:
    return lambda configs, rounds: [measure(c, rounds) for c in configs]


@dataclass
class StudyContext:
    db: Database
    storage: Any
    device_id: int
    environment_id: int
    device_fingerprint: str
    sampler: str
    seed: int
    budget: Budget
    deadline: float | None = None  # no new trial may end after this (a phase's share of the time budget)
    from_similar: bool = False  # seed each study with this task's winners on other device models
    settle_by: float | None = None  # verifications may run to this (the sweep's own deadline)
    costs: Costs = field(default_factory=Costs)  # what measurements have cost lately, shared by every phase
    rankers: Any = None  # tuner.ranking.Rankers: the learned ranking (None: off)
    prior: Any = None  # tuner.ranking.PriorRows: shipped winners of this device model, seeds when the database has none
    stored: Counter[str] = field(default_factory=Counter)  # trials this sweep stored (search.record), by status

    def time_left(self) -> bool:
        return fits(self.deadline, 0.0)

    def fits(self, kind: str) -> bool:
        """Whether one more measurement of ``kind`` (its recent cost) ends before the deadline. Until it has been
        timed, a trial that compiles the workload (graph knobs, fusion groupings) is expected to cost two compiles:
        the first one compiles its baseline too (a resnet50 grouping's on the H200: 37 s against a 19.7-s compile;
        taken as one compile, regnet_y_400mf's ran 18 s past its phase's deadline)."""
        return fits(self.deadline, self.costs.expect(kind) or self._compile_floor(kind))

    def settles(self, kind: str, fallback: str | None, compiles: int = 0, reserve_s: float = 0.0) -> bool:
        """Whether one verification-length measurement of ``kind`` ends by ``settle_by``, ``reserve_s`` before it."""
        return fits(self.settle_by, self.expected(kind, fallback, compiles) + reserve_s)

    def expected(self, kind: str, fallback: str | None, compiles: int = 0) -> float:
        """A verification of ``kind``: its recent cost, else ``fallback``'s scaled, else ``compiles`` compiles."""
        scale = self.budget.verify_rounds / max(1, self.budget.rounds)
        return self.costs.expect(kind, fallback=fallback, scale=scale) or compiles * self.costs.expect(CAPTURE)

    def _compile_floor(self, kind: str) -> float:
        return FIRST_GRAPH_TRIAL_COMPILES * self.costs.expect(CAPTURE) if beside_base(kind) else 0.0

    def target(self, kind: str, unranked: int) -> int:
        """Distinct configs a task of ``kind`` measures: fewer when a learned ranking picks them."""
        return self.rankers.target(kind, unranked, self.budget.ranked) if self.rankers else unranked

    def first_configs(self, task: TaskRecord, space: Space) -> list[dict[str, Any]]:
        """What a new study measures after the default: the ranked candidates, or without a model the space's seeds
        (for a template site, every choice Inductor offered)."""
        ranked = self.rankers.first(task.kind, task.signature, space, self.budget.ranked) if self.rankers else []
        return ranked or space.seeds()

    def can_verify(self, kind: str) -> bool:
        """Whether re-measuring a finalist of ``kind`` against its default ends by the phase's deadline (else the
        sweep's own): the check's share stays whole (a mobilenet_v2 sweep once verified into it and lost the check)."""
        return fits(self.deadline if self.deadline is not None else self.settle_by, self.expected(f"{kind}:verify", kind))


def open_storage(url: str, attempts: int = 5) -> Any:
    """Optuna's RDB storage on the same database. Several workers starting at once may race to create
    Optuna's tables (on PostgreSQL also its enum types: "type studydirection already exists"); the loser
    retries and finds them made."""
    import optuna
    from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

    for i in range(attempts):
        try:
            return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})
        except (IntegrityError, OperationalError, ProgrammingError):
            if i == attempts - 1:
                raise
            time.sleep(0.5 * (i + 1))
    raise AssertionError("unreachable")


class TrialSink(Protocol):
    """Where a measured trial is stored: a database, and the device and environment it was measured on."""

    db: Database
    device_id: int
    environment_id: int


def record(tuning: TrialSink, task: TaskRecord, config: dict[str, Any], m: Measurement) -> TrialRecord:
    trial = tuning.db.record_trial(task.id, tuning.device_id, tuning.environment_id, config, m.status.value, median_ms=m.median_ms,
                                   min_ms=m.min_ms, spread_ms=m.spread_ms, baseline_ms=m.baseline_ms, error=m.error)
    if (tally := getattr(tuning, "stored", None)) is not None:
        tally[m.status.value] += 1
    return trial


def first_to_measure(tuning: StudyContext, task: TaskRecord, space: Space, seen: set[str]) -> list[dict[str, Any]]:
    """What a task measures before its sampler is asked, none measured before: Inductor's default, what the task's own
    capture points to (``Space.evidence``), the winners of near tasks on this device (``tuner.study.seeds``), the ranked
    candidates or else the space's seeds (``StudyContext.first_configs``) and, with ``from_similar``, other device
    models' winners (so each is measured here before it can win), each once. ``Asker`` measures them without asking
    the study and adds each to it once finished (``tuner.study.direct``)."""
    near = near_seeds(task.kind, task.signature, space, _near_winners(tuning, task))
    first = [*([] if beside_base(task.kind) else [space.default]), *space.evidence(), *near, *tuning.first_configs(task, space)]
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


def rejected(tuning: StudyContext, task: TaskRecord, space: Space, config: dict[str, Any], on_trial: Callable[[TrialRecord], None]) -> TrialRecord | None:
    """``config``'s trial, stored as invalid (never measured), when its space rejects it; else None."""
    try:
        space.validate(config)
    except InvalidConfig as e:
        trial = record(tuning, task, config, Measurement(Status.INVALID, error=str(e)))
        on_trial(trial)
        return trial
    return None


def ask_new(
    tuning: StudyContext, task: TaskRecord, space: Space, study: Any, seen: set[str], invalid: set[str], on_trial: Callable[[TrialRecord], None]
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
    return {config_hash(t.config) for t in trials}, {config_hash(t.config) for t in trials if t.status == Status.INVALID.value}


Pending = dict[str, tuple[dict[str, Any], list[Any]]]  # config hash -> (config, the Optuna trials that asked for it)


@dataclass
class Asker:
    """One study's asking: new configs in batches, each measured once, every asking trial told its result."""

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
        if self.asks:  # a first batch counts what the Asker was made with, just read from the database
            self.refresh()
        pending: Pending = {}
        while len(pending) < batch and self.open():
            self.asks += 1
            fresh = self._direct() if self.queue else ask_new(self.tuning, self.task, self.space, self.study, self.seen, self.invalid, self.on_trial)
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
    asker = Asker(tuning, task, space, None, seen, tuning.target(task.kind, target or tuning.budget.trials), on_trial, invalid=invalid)
    if not asker.open():
        return 0
    many: MeasureMany = measure if batch > 1 else one_by_one(measure)  # type: ignore[assignment,arg-type]
    asker.study = open_study(tuning, task, space, join=join)
    asker.queue = [] if join else first_to_measure(tuning, task, space, seen)
    measured = 0
    while asker.open() and tuning.fits(space.family):
        pending = asker.ask_batch(batch)
        if not pending:
            continue
        configs = [c for c, _ in pending.values()]
        with tuning.costs.timed(space.family):
            results = many(configs, tuning.budget.rounds)
        asker.tell_batch(pending, results)
        measured += len(configs)
    return measured


def finalist(tuning: StudyContext, task: TaskRecord, space: Space) -> tuple[list[TrialRecord], TrialRecord | None, TrialRecord | None]:
    """The task's measured trials on this device, its latest trial of the default, and its best other config
    when that beats the default by the budget's gain (else None)."""
    ok = [t for t in tuning.db.trials(task.id, tuning.device_id) if t.status == Status.OK.value and t.ratio is not None]
    default_hash = config_hash(space.default)
    default = next((t for t in reversed(ok) if config_hash(t.config) == default_hash), None)
    candidates = sorted((t for t in ok if config_hash(t.config) != default_hash), key=lambda t: t.ratio or 9e9)
    top = candidates[0] if candidates and candidates[0].ratio is not None and candidates[0].ratio < 1 - tuning.budget.min_gain else None
    return ok, default, top


def settle(
    tuning: StudyContext, task: TaskRecord, space: Space, default: TrialRecord | None, default_ms: float | None,
    top: TrialRecord | None, m: Measurement | None,
) -> TaskOutcome:
    """Store the task's winner: ``top`` when ``m``, its re-measurement against the default, shows the gain again;
    else the default."""
    winner, best_ms, is_default = space.default, default_ms, True
    trial_id = default.id if default else None
    if top is not None and m is not None:
        rec = record(tuning, task, top.config, m)
        if m.beats_default(tuning.budget.min_gain):
            winner, best_ms, default_ms, is_default, trial_id = top.config, m.median_ms, m.baseline_ms, False, rec.id
        elif m.ok:
            default_ms = best_ms = m.baseline_ms
    return _store_winner(tuning, task, trial_id, winner, is_default, default_ms, best_ms)


def _store_winner(tuning: StudyContext, task: TaskRecord, trial_id: int | None, winner: dict[str, Any], is_default: bool,
                  default_ms: float | None, best_ms: float | None) -> TaskOutcome:
    """Store the task's winner and return its outcome; the study carries it as user attributes (the dashboard)."""
    tuning.db.set_winner(task.id, tuning.device_id, trial_id, winner, best_ms, default_ms)
    total = len(tuning.db.trials(task.id, tuning.device_id))
    outcome = TaskOutcome(task, winner, is_default, default_ms, best_ms, 0, total)
    annotate_study(tuning, task, outcome)
    return outcome


# With no time left to verify, a finalist still wins on its own trial when it was this much faster than the default
# timed beside it in the same run (a site batch's finalist, a graph-level trial; numerics checked), far past the
# noise between two runs. (On the H200 a resnet50 grouping 14% faster stayed unstored for want of 3 s to verify.)
UNVERIFIED_GAIN = 0.10


def choose_winner(tuning: StudyContext, task: TaskRecord, space: Space, measure: Measure) -> TaskOutcome:
    """Re-measure the best candidate against the default in one run; it wins only with a real gain. A verification
    that would end past ``settle_by`` is not started: the stored answer stays until a rerun verifies, unless the
    candidate's trial timed it beside the default (``TaskKind.beside_base``) with a clear gain (``UNVERIFIED_GAIN``)."""
    ok, default, top = finalist(tuning, task, space)
    default_ms = default.median_ms if default else (ok[0].baseline_ms if ok else None)
    if top is not None and not tuning.can_verify(space.family):
        if beside_base(task.kind):
            return settle_measured(tuning, task, space, default, top, UNVERIFIED_GAIN)
        return unverified(tuning, task, space, default_ms)
    m = None
    if top is not None:
        with tuning.costs.timed(f"{space.family}:verify"):
            m = measure(top.config, tuning.budget.verify_rounds)
    return settle(tuning, task, space, default, default_ms, top, m)


def settle_measured(tuning: StudyContext, task: TaskRecord, space: Space, default: TrialRecord | None, top: TrialRecord | None, gain: float) -> TaskOutcome:
    """No time to verify: ``top`` wins on its own trial (timed beside the default in one run, numerics checked) when
    that beat the default by ``gain``, far past the noise between two runs; else, as :func:`unverified`."""
    default_ms = default.median_ms if default else (top.baseline_ms if top else None)
    if top is None or top.ratio is None or top.ratio > 1 - gain or not top.median_ms or not top.baseline_ms:
        return unverified(tuning, task, space, default_ms)
    return _store_winner(tuning, task, top.id, top.config, False, top.baseline_ms, top.median_ms)


def unverified(tuning: StudyContext, task: TaskRecord, space: Space, default_ms: float | None) -> TaskOutcome:
    """The outcome of a task whose finalist had no time to be verified: its stored winner stays (Inductor's default
    when it has none yet), and a rerun verifies."""
    current = tuning.db.winner_config(task.id, tuning.device_id)
    if current is None:
        tuning.db.set_winner(task.id, tuning.device_id, None, space.default, default_ms, default_ms)
        current = space.default
    total = len(tuning.db.trials(task.id, tuning.device_id))
    return TaskOutcome(task, current, current == space.default, default_ms, None, 0, total)
