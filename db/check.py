"""``tuner db check``: the rows whose JSON cells cannot be read (every reader skips them), listed and, on request, dropped.

Dropping a task drops its trials, winners and links with it (foreign keys cascade); a trial, its winners' reference;
a device, every trial, winner and claim measured on it."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, select, update

from tuner.db.cells import Unreadable
from tuner.db.models import Claim, Device, Task, Trial, Winner, WorkloadTask
from tuner.db.repository import Database

_CELLS = (
    (Task, "signature", Task.name),
    (Trial, "config", Trial.uid),
    (Winner, "config", Winner.task_id),
    (Device, "info", Device.name),
)


@dataclass(frozen=True)
class BadRow:
    table: str
    id: int
    column: str
    label: str  # the task's name, the trial's uid, the winner's task id or the device's name
    raw: str  # the cell's text, cut short


def unreadable_rows(db: Database) -> list[BadRow]:
    out = []
    with db.session() as s:
        for model, column, label in _CELLS:
            for rid, cell, name in s.execute(select(model.id, getattr(model, column), label)):
                if isinstance(cell, Unreadable):
                    out.append(BadRow(model.__tablename__, rid, column, str(name), cell.raw))
    return out


def drop(db: Database, rows: list[BadRow]) -> int:
    """Delete these rows (and what hangs on them) in one transaction; how many rows were named."""
    by_table: dict[str, list[int]] = {}
    for r in rows:
        by_table.setdefault(r.table, []).append(r.id)
    with db.session() as s:
        if ids := by_table.get(Device.__tablename__):
            for model in (Winner, Claim, Trial):
                s.execute(delete(model).where(model.device_id.in_(ids)))
            s.execute(delete(Device).where(Device.id.in_(ids)))
        if ids := by_table.get(Winner.__tablename__):
            s.execute(delete(Winner).where(Winner.id.in_(ids)))
        if ids := by_table.get(Trial.__tablename__):
            s.execute(update(Winner).where(Winner.trial_id.in_(ids)).values(trial_id=None))
            s.execute(delete(Trial).where(Trial.id.in_(ids)))
        if ids := by_table.get(Task.__tablename__):
            for model in (Winner, Claim, Trial, WorkloadTask):
                s.execute(delete(model).where(model.task_id.in_(ids)))
            s.execute(delete(Task).where(Task.id.in_(ids)))
    return len(rows)


__all__ = ["BadRow", "drop", "unreadable_rows"]
