"""Claims: which worker tunes which task. Safe with many processes on many machines.

A worker picks candidate tasks with ``SELECT … FOR UPDATE SKIP LOCKED`` (PostgreSQL; SQLite serialises
writers instead), then takes one with a single atomic statement: an INSERT (the unique (task, device)
constraint lets only one win) or an UPDATE of a claim that expired, belongs to a dead process on this
host, or was finished for a smaller trial target. Heartbeats push ``expires_at`` forward.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
from typing import Any

from sqlalchemy import and_, select, update
from sqlalchemy.exc import IntegrityError

from tuner.db.models import Claim, Task, utcnow
from tuner.db.repository import Database


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _dead_here(worker: str) -> bool:
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _aware(t: dt.datetime) -> dt.datetime:
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)  # SQLite hands back naive datetimes


def claim_next(db: Database, task_ids: list[int], device_id: int, worker: str, target: int, ttl_s: float) -> int | None:
    """Claim the first of ``task_ids`` (in order) that nobody is tuning and that is not finished for ``target``."""
    now = utcnow()
    expires = now + dt.timedelta(seconds=ttl_s)
    for tid in _candidates(db, task_ids, device_id, target, now):
        with db.session() as s:
            # FOR NO KEY UPDATE SKIP LOCKED: a task row another worker is claiming right now is skipped, not
            # waited for (waiting on it from here could deadlock with that worker's unique-index check); and
            # other workers' trial inserts, whose foreign-key checks take KEY SHARE, are never blocked by it.
            # SQLite has no row locks and serialises writers instead, so there the row always comes back.
            locked = s.scalar(select(Task.id).where(Task.id == tid).with_for_update(skip_locked=True, key_share=True))
            if locked is None:
                continue
            row = s.scalar(select(Claim).where(Claim.task_id == tid, Claim.device_id == device_id))
            if row is None:
                try:
                    with s.begin_nested():
                        s.add(Claim(task_id=tid, device_id=device_id, worker=worker, expires_at=expires))
                    return tid
                except IntegrityError:
                    continue  # another worker inserted it first
            if not _takeable(row, target, now):
                continue
            # Atomic takeover: only one worker's UPDATE can still match the row it read.
            res = s.execute(
                update(Claim)
                .where(Claim.id == row.id, Claim.worker == row.worker, Claim.expires_at == row.expires_at)
                .values(worker=worker, expires_at=expires, done_target=None)
            )
            if res.rowcount == 1:
                return tid
    return None


def _candidates(db: Database, task_ids: list[int], device_id: int, target: int, now: dt.datetime) -> list[int]:
    with db.session() as s:
        rows = {
            c.task_id: c
            for c in s.scalars(select(Claim).where(Claim.task_id.in_(task_ids), Claim.device_id == device_id))
        }
    return [tid for tid in task_ids if tid not in rows or _takeable(rows[tid], target, now)]


def _takeable(c: Claim, target: int, now: dt.datetime) -> bool:
    """Finished for a smaller target, or unfinished and held by nobody alive (expired, or a dead process here)."""
    if c.done_target is not None:
        return c.done_target < target
    return _aware(c.expires_at) < now or _dead_here(c.worker)


def renew(db: Database, task_id: int, device_id: int, worker: str, ttl_s: float) -> bool:
    """Heartbeat; False when the claim was lost (expired and taken over)."""
    with db.session() as s:
        res = s.execute(
            update(Claim)
            .where(
                Claim.task_id == task_id,
                Claim.device_id == device_id,
                Claim.worker == worker,
                Claim.done_target.is_(None),
            )
            .values(expires_at=utcnow() + dt.timedelta(seconds=ttl_s))
        )
        return res.rowcount == 1


def finish(db: Database, task_id: int, device_id: int, worker: str, target: int) -> None:
    with db.session() as s:
        s.execute(
            update(Claim)
            .where(Claim.task_id == task_id, Claim.device_id == device_id, Claim.worker == worker)
            .values(done_target=target)
        )


def _expire(db: Database, *where: Any) -> None:
    """Expire the unfinished claims matching ``where``: whoever asks next may take them."""
    with db.session() as s:
        s.execute(
            update(Claim)
            .where(Claim.done_target.is_(None), *where)
            .values(expires_at=utcnow() - dt.timedelta(seconds=1))
        )


def release(db: Database, task_id: int, device_id: int, worker: str) -> None:
    """Give a claim up unfinished (the time budget ran out): the next run (or another worker) continues the task."""
    _expire(db, Claim.task_id == task_id, Claim.device_id == device_id, Claim.worker == worker)


def pending(db: Database, task_ids: list[int], device_id: int, target: int) -> int:
    """How many of ``task_ids`` are not finished for ``target`` (claimed by someone or not)."""
    with db.session() as s:
        done = s.scalars(
            select(Claim.task_id).where(
                Claim.task_id.in_(task_ids),
                Claim.device_id == device_id,
                and_(Claim.done_target.is_not(None), Claim.done_target >= target),
            )
        ).all()
    return len(set(task_ids) - set(done))


def held_by_others(db: Database, task_ids: list[int], device_id: int, worker: str) -> list[int]:
    """Those of ``task_ids`` (in order) that another live worker is tuning now (claimed, unfinished, not expired):
    a worker with nothing left to claim can join their studies."""
    now = utcnow()
    with db.session() as s:
        rows = s.scalars(
            select(Claim).where(
                Claim.task_id.in_(task_ids),
                Claim.device_id == device_id,
                Claim.worker != worker,
                Claim.done_target.is_(None),
            )
        ).all()
    live = {c.task_id for c in rows if _aware(c.expires_at) >= now and not _dead_here(c.worker)}
    return [t for t in task_ids if t in live]


def release_all(db: Database, worker: str) -> None:
    """Give up every unfinished claim of ``worker`` (its sweep was interrupted): a rerun anywhere continues them now,
    not after the claims expire."""
    _expire(db, Claim.worker == worker)


__all__ = ["claim_next", "finish", "held_by_others", "pending", "release", "release_all", "renew", "worker_id"]
