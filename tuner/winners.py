"""The stored winners of a workload's tasks: what they force at compile time, what a sweep reports of them, and
putting them back to Inductor's defaults."""

from __future__ import annotations

from typing import Any

from tuner.backend.forcing import Forcing
from tuner.db import Database
from tuner.measure.result import Status
from tuner.search import StudyContext, TaskOutcome
from tuner.tasks import TaskSpec


def winners_forcing(db: Database, tasks: list[TaskSpec], records: list[Any], device_id: int, before: int | None = None) -> Forcing:
    """The stored winners of the workload's tasks (of those before task id ``before`` in order, when given)."""
    pairs = list(zip(tasks, records))
    if before is not None:
        pairs = pairs[: next((i for i, (_, r) in enumerate(pairs) if r.id == before), len(pairs))]
    return Forcing.union(winner_parts(db, pairs, device_id).values())


def winner_parts(db: Database, tasks: list[tuple[TaskSpec, Any]], device_id: int, *, defaults: bool = True) -> dict[int, Forcing]:
    """{task id: what its stored winner forces} for the tasks with a winner valid in their space (with
    ``defaults=False``, only those whose winner is not Inductor's default)."""
    out = {}
    for t, r in tasks:
        config = db.winner_config(r.id, device_id)
        if config is not None and t.space.is_valid(config) and (defaults or config != t.space.default):
            out[r.id] = t.forcing(config)
    return out


def revert_to_defaults(db: Database, device_id: int, tasks: list[tuple[TaskSpec, Any]]) -> dict[int, dict[str, Any]]:
    """Put these tasks' winners back to their defaults; {task id: default} of those that changed."""
    out = {}
    for t, r in tasks:
        if db.winner_config(r.id, device_id) not in (None, t.space.default):
            db.set_winner(r.id, device_id, None, t.space.default, None, None)
            out[r.id] = t.space.default
    return out


def stored_outcome(db: Database, ctx: StudyContext, rec: Any, task: TaskSpec) -> TaskOutcome | None:
    """The task's stored winner for this device, if it has one that is still valid in its space."""
    winner = db.winner_config(rec.id, ctx.device_id)
    if winner is None or not task.space.is_valid(winner):
        return None
    trials = db.trials(rec.id, ctx.device_id)
    ok = [t for t in trials if t.status == Status.OK.value]
    match = [t for t in ok if t.config == winner]
    best = match[-1] if match else None
    is_default = winner == task.space.default
    default_ms = best.baseline_ms if best else None
    return TaskOutcome(rec, winner, is_default, default_ms, best.median_ms if best else None, 0, len(trials))
