"""The stored winners of a workload's tasks: one read of them (:class:`StoredWinners`), what they force at compile time,
what a sweep reports of them, and putting them back to Inductor's defaults."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tuner.core import Forcing, TaskOutcome, TaskSpec
from tuner.db import Database, TaskRecord
from tuner.measure.result import Status

Pairs = Iterable[tuple[TaskSpec, TaskRecord]]


@dataclass
class StoredWinners:
    """The stored winner configs of some tasks on one device, read once ({task id: config}); a winner this process
    settles afterwards is added with :meth:`settled`, so a phase reads the database once, not once per task."""

    configs: dict[int, dict[str, Any]]

    @classmethod
    def read(cls, db: Database, task_ids: list[int], device_id: int) -> StoredWinners:
        return cls(db.winner_configs(task_ids, device_id))

    def settled(self, task_id: int, config: dict[str, Any]) -> None:
        self.configs[task_id] = config

    def parts(self, pairs: Pairs, *, defaults: bool = True) -> dict[int, Forcing]:
        """{task id: what its winner forces} for the tasks with a winner valid in their space (with
        ``defaults=False``, only those whose winner is not Inductor's default)."""
        out = {}
        for t, r in pairs:
            config = self.configs.get(r.id)
            if config is not None and t.space.is_valid(config) and (defaults or config != t.space.default):
                out[r.id] = t.forcing(config)
        return out

    def forcing(self, pairs: Pairs, before: int | None = None) -> Forcing:
        """What the winners of these tasks force together (of those before task id ``before`` in order, when given)."""
        pairs = list(pairs)
        if before is not None:
            pairs = pairs[: next((i for i, (_, r) in enumerate(pairs) if r.id == before), len(pairs))]
        return Forcing.union(self.parts(pairs).values())


def revert_outcomes(
    db: Database, device_id: int, pairs: Pairs, outcomes: dict[int, TaskOutcome]
) -> dict[int, dict[str, Any]]:
    """:func:`revert_to_defaults`, and each of those tasks' outcome in ``outcomes`` put back with it."""
    reverted = revert_to_defaults(db, device_id, pairs)
    for tid, default in reverted.items():
        if tid in outcomes:
            outcomes[tid] = outcomes[tid].reverted(default)
    return reverted


def revert_to_defaults(db: Database, device_id: int, pairs: Pairs) -> dict[int, dict[str, Any]]:
    """Put these tasks' winners back to their defaults; {task id: default} of those that changed. A task with no
    winner gets its default stored: an exact answer, which keeps a compile from transferring another size's to it."""
    out = {}
    for t, r in pairs:
        if db.winner_config(r.id, device_id) != t.space.default:
            db.keep_default(r.id, device_id, t.space.default)
            out[r.id] = t.space.default
    return out


def stored_outcome(db: Database, device_id: int, rec: TaskRecord, task: TaskSpec) -> TaskOutcome | None:
    """The task's stored winner for this device, if it has one that is still valid in its space."""
    winner = db.winner_config(rec.id, device_id)
    if winner is None or not task.space.is_valid(winner):
        return None
    trials = db.trials(rec.id, device_id)
    match = [t for t in trials if t.status == Status.OK.value and t.config == winner]
    best = match[-1] if match else None
    is_default = winner == task.space.default
    return TaskOutcome(
        rec, winner, is_default, best.baseline_ms if best else None, best.median_ms if best else None, 0, len(trials)
    )
