"""What every study of a sweep shares (:class:`StudyContext`: the database, Optuna's storage, the budget, deadlines,
costs, the learned ranking), and :func:`record`, which stores a measurement before anyone is told of it."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from tuner.budget.timebox import Timebox
from tuner.db import Database, TaskRecord, TrialRecord
from tuner.measure.result import Measurement, Status
from tuner.search_spaces import Space

Measure = Callable[[dict[str, Any], int], Measurement]  # (config, rounds) -> measurement
MeasureMany = Callable[[list[dict[str, Any]], int], list[Measurement]]  # several configs at once (compiled in parallel)


def one_by_one(measure: Measure) -> MeasureMany:
    return lambda configs, rounds: [measure(c, rounds) for c in configs]


@dataclass
class StudyContext(Timebox):
    """A sweep's studies share this: its time box (the budget, deadlines and costs), the database and Optuna's
    storage, the sampler, and the learned ranking."""

    db: Database
    storage: Any
    device_id: int
    environment_id: int
    device_fingerprint: str
    sampler: str
    seed: int
    from_similar: bool = False  # seed each study with this task's winners on other device models
    rankers: Any = None  # tuner.ranking.Rankers: the learned ranking (None: off)
    prior: Any = None  # tuner.ranking.PriorRows: shipped winners of this device model, seeds when the database has none
    stored: Counter[str] = field(default_factory=Counter)  # trials this sweep stored (context.record), by status
    on_stored: Callable[[str], None] | None = (
        None  # told each measured trial's status as it is stored (the progress bar)
    )

    def target(self, kind: str, unranked: int) -> int:
        """Distinct configs a task of ``kind`` measures: fewer when a learned ranking picks them."""
        return self.rankers.target(kind, unranked, self.budget.ranked) if self.rankers else unranked

    def first_configs(self, task: TaskRecord, space: Space) -> list[dict[str, Any]]:
        """What a new study measures after the default: the ranked candidates, or without a model the space's seeds
        (for a template site, every choice Inductor offered)."""
        ranked = self.rankers.first(task.kind, task.signature, space, self.budget.ranked) if self.rankers else []
        return ranked or space.seeds()


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
    trial = tuning.db.record_trial(
        task.id,
        tuning.device_id,
        tuning.environment_id,
        config,
        m.status.value,
        median_ms=m.median_ms,
        min_ms=m.min_ms,
        spread_ms=m.spread_ms,
        baseline_ms=m.baseline_ms,
        error=m.error,
    )
    if (tally := getattr(tuning, "stored", None)) is not None:
        tally[m.status.value] += 1
    if (
        told := getattr(tuning, "on_stored", None)
    ) is not None and m.status is not Status.INVALID:  # invalid: never measured
        told(m.status.value)
    return trial
