"""The repository API: the one object the rest of tuner talks to for storage."""

from __future__ import annotations

import contextlib
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from tuner.db.cells import Unreadable, readable
from tuner.db.engine import _first_line, _safe, check_schema, make_engine
from tuner.db.fingerprint import DeviceInfo, EnvironmentInfo
from tuner.db.models import Device, Environment, Task, Trial, Winner, WorkloadTask
from tuner.errors import StorageError
from tuner.keys import config_hash


@dataclass(frozen=True)
class TaskRecord:
    id: int
    key: str
    kind: str
    name: str
    signature: dict[str, Any]


@dataclass(frozen=True)
class TrialRecord:
    id: int
    config: dict[str, Any]
    status: str
    median_ms: float | None
    baseline_ms: float | None
    error: str | None
    spread_ms: float | None = None  # the candidate's interquartile range in its trial

    @property
    def ratio(self) -> float | None:
        if self.median_ms is None or not self.baseline_ms:
            return None
        return self.median_ms / self.baseline_ms


class Database:
    """A tuning database behind one SQLAlchemy engine."""

    def __init__(self, engine: Engine, url: str):
        self.engine = engine
        self.url = url
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @classmethod
    def open(cls, url: str, *, create: bool = True, read_only: bool = False) -> "Database":
        """``create``: make the schema of an empty database; ``read_only``: change nothing, create nothing (a
        missing SQLite file is an error, a read-only one is fine)."""
        engine = make_engine(url, create_dirs=create, read_only=read_only)
        try:
            check_schema(engine, url, create=create and not read_only)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, url)

    @property
    def safe_url(self) -> str:
        return _safe(self.url)

    def close(self) -> None:
        self.engine.dispose()

    def intact(self, *cells: Any) -> bool:
        """Whether a row's JSON cells all parse (else it is skipped, with one warning per database)."""
        return readable(*cells, where=f"database {self.safe_url}")

    @contextlib.contextmanager
    def session(self) -> Iterator[Session]:
        try:
            with self._sessions.begin() as s:
                yield s
        except SQLAlchemyError as e:
            raise StorageError(f"database {self.safe_url}: {_first_line(e)}") from e

    # --- identities -------------------------------------------------------------------------
    def _get_or_create(self, model, fingerprint: str, **values) -> int:
        for _ in range(3):
            with self.session() as s:
                found = s.scalar(select(model.id).where(model.fingerprint == fingerprint))
                if found is not None:
                    return found
            try:
                with self._sessions.begin() as s:
                    row = model(fingerprint=fingerprint, **values)
                    s.add(row)
                    s.flush()
                    return row.id
            except IntegrityError:  # another worker inserted it first
                continue
        raise StorageError(f"database {self.safe_url}: cannot register {model.__tablename__} row")

    def device_id(self, dev: DeviceInfo) -> int:
        return self._get_or_create(Device, dev.fingerprint, kind=dev.kind, name=dev.name, info=dev.info)

    def environment_id(self, env: EnvironmentInfo) -> int:
        return self._get_or_create(
            Environment, env.fingerprint, torch=env.torch, triton=env.triton, cuda=env.cuda, python=env.python, tuner=env.tuner
        )

    # --- tasks ------------------------------------------------------------------------------
    def upsert_task(self, key: str, kind: str, name: str, signature: dict[str, Any], space_fingerprint: str) -> TaskRecord:
        for _ in range(3):
            with self.session() as s:
                t = s.scalar(select(Task).where(Task.key == key))
                if t is not None:
                    if isinstance(t.signature, Unreadable):  # damaged: the capture that made this key says it again
                        t.signature = signature
                    return TaskRecord(t.id, t.key, t.kind, t.name, t.signature)
            try:
                with self._sessions.begin() as s:
                    t = Task(key=key, kind=kind, name=name[:200], signature=signature, space_fingerprint=space_fingerprint)
                    s.add(t)
                    s.flush()
                    return TaskRecord(t.id, t.key, t.kind, t.name, t.signature)
            except IntegrityError:
                continue
        raise StorageError(f"database {self.safe_url}: cannot register task {key[:12]}")

    def link_workload(self, workload: str, task_ids: list[int]) -> None:
        with self.session() as s:
            have = set(s.scalars(select(WorkloadTask.task_id).where(WorkloadTask.workload == workload)))
            for pos, tid in enumerate(task_ids):
                if tid not in have:
                    s.add(WorkloadTask(workload=workload, task_id=tid, position=pos))

    # --- trials -----------------------------------------------------------------------------
    def find_trial(self, task_id: int, device_id: int, config: dict[str, Any]) -> TrialRecord | None:
        """The latest trial of exactly this config: measured configs are never measured twice."""
        with self.session() as s:
            t = s.scalar(
                select(Trial)
                .where(Trial.task_id == task_id, Trial.device_id == device_id, Trial.config_hash == config_hash(config))
                .order_by(Trial.id.desc())
                .limit(1)
            )
            return _trial_record(t) if t is not None and self.intact(t.config) else None

    def record_trial(
        self,
        task_id: int,
        device_id: int,
        environment_id: int,
        config: dict[str, Any],
        status: str,
        *,
        median_ms: float | None = None,
        min_ms: float | None = None,
        spread_ms: float | None = None,
        baseline_ms: float | None = None,
        error: str | None = None,
    ) -> TrialRecord:
        with self.session() as s:
            t = Trial(
                uid=str(uuid.uuid4()),
                task_id=task_id,
                device_id=device_id,
                environment_id=environment_id,
                config=config,
                config_hash=config_hash(config),
                status=status,
                median_ms=median_ms,
                min_ms=min_ms,
                spread_ms=spread_ms,
                baseline_ms=baseline_ms,
                error=(error or None) and error[:4000],
                host=socket.gethostname()[:200],
            )
            s.add(t)
            s.flush()
            return _trial_record(t)

    def trials(self, task_id: int, device_id: int) -> list[TrialRecord]:
        with self.session() as s:
            rows = s.scalars(
                select(Trial).where(Trial.task_id == task_id, Trial.device_id == device_id).order_by(Trial.id)
            )
            return [_trial_record(t) for t in rows if self.intact(t.config)]

    # --- winners ----------------------------------------------------------------------------
    def set_winner(
        self, task_id: int, device_id: int, trial_id: int | None, config: dict[str, Any], median_ms: float | None, baseline_ms: float | None
    ) -> None:
        with self.session() as s:
            w = s.scalar(select(Winner).where(Winner.task_id == task_id, Winner.device_id == device_id))
            if w is None:
                w = Winner(task_id=task_id, device_id=device_id)
                s.add(w)
            w.trial_id, w.config, w.median_ms, w.baseline_ms = trial_id, config, median_ms, baseline_ms

    def keep_default(self, task_id: int, device_id: int, default: dict[str, Any], median_ms: float | None = None,
                     baseline_ms: float | None = None) -> None:
        """Inductor's own choice (``default``) as the task's winner: the question is settled, and no trial is named."""
        self.set_winner(task_id, device_id, None, default, median_ms, baseline_ms)

    def winner_config(self, task_id: int, device_id: int) -> dict[str, Any] | None:
        with self.session() as s:
            config = s.scalar(select(Winner.config).where(Winner.task_id == task_id, Winner.device_id == device_id))
        return config if self.intact(config) else None

    def winner_speedup(self, task_id: int, device_id: int) -> float | None:
        """The stored winner's default time over its own (None without both)."""
        with self.session() as s:
            row = s.execute(select(Winner.median_ms, Winner.baseline_ms).where(Winner.task_id == task_id, Winner.device_id == device_id)).first()
        return row[1] / row[0] if row and row[0] and row[1] else None

    def winner_configs(self, task_ids: list[int], device_id: int) -> dict[int, dict[str, Any]]:
        """{task id: winner config} for those of ``task_ids`` with a winner on this device, in one query."""
        if not task_ids:
            return {}
        with self.session() as s:
            rows = s.execute(select(Winner.task_id, Winner.config).where(Winner.task_id.in_(task_ids), Winner.device_id == device_id))
            return {tid: config for tid, config in rows if self.intact(config)}

    def winners_of_kind(self, kind: str, device_id: int, exclude_task_id: int) -> list[tuple[dict[str, Any], dict[str, Any], float | None]]:
        """(signature, winner config, verified speedup) of every other task of ``kind`` with a winner on this device."""
        with self.session() as s:
            rows = s.execute(
                select(Task.signature, Winner.config, Winner.median_ms, Winner.baseline_ms)
                .join(Winner, Winner.task_id == Task.id)
                .where(Task.kind == str(kind), Winner.device_id == device_id, Task.id != exclude_task_id)
            ).all()
        return [(sig, config, (base / med) if med and base else None) for sig, config, med, base in rows if self.intact(sig, config)]

    def timed_trials(self, kinds: tuple[str, ...], device_id: int, statuses: tuple[str, ...]) -> list[tuple[str, dict[str, Any], dict[str, Any], float]]:
        """(task key, signature, config, ratio to the default timed in the same run) of every trial of ``kinds``
        on this device with one of ``statuses`` and a ratio: what a learned ranking trains on, in one query."""
        with self.session() as s:
            rows = s.execute(
                select(Task.key, Task.signature, Trial.config, Trial.median_ms, Trial.baseline_ms)
                .join(Trial, Trial.task_id == Task.id)
                .where(Task.kind.in_([str(k) for k in kinds]), Trial.device_id == device_id, Trial.status.in_(statuses))
                .where(Trial.median_ms.is_not(None), Trial.baseline_ms > 0)
            ).all()
        return [(key, sig, config, med / base) for key, sig, config, med, base in rows if self.intact(sig, config)]

    def workload_names(self) -> list[str]:
        """Every workload the database has tasks for, by name."""
        with self.session() as s:
            return sorted(s.scalars(select(WorkloadTask.workload).distinct()))

    def task_names(self, keys: list[str]) -> dict[str, str]:
        """{task key: readable name} of the stored ones among ``keys``."""
        with self.session() as s:
            return dict(s.execute(select(Task.key, Task.name).where(Task.key.in_(keys))).tuples().all())

    def winner_devices(self, keys: list[str]) -> dict[str, tuple[str, int]]:
        """{device fingerprint: (its name, how many of the tasks ``keys`` hold a winner measured on it)}."""
        with self.session() as s:
            rows = s.execute(
                select(Device.fingerprint, Device.name, func.count(Winner.id))
                .join(Winner, Winner.device_id == Device.id).join(Task, Task.id == Winner.task_id)
                .where(Task.key.in_(keys)).group_by(Device.fingerprint, Device.name)
            ).tuples().all()
        return {fp: (name, int(n)) for fp, name, n in rows}

    def winners_elsewhere(self, task_id: int, device_id: int) -> list[dict[str, Any]]:
        """This task's winners on other device models, best verified speedup first (seeds for --from-similar)."""
        with self.session() as s:
            rows = s.execute(
                select(Winner.config, Winner.median_ms, Winner.baseline_ms).where(Winner.task_id == task_id, Winner.device_id != device_id)
            ).all()
        rows = [r for r in rows if self.intact(r[0])]
        rows.sort(key=lambda r: -(r[2] / r[1]) if r[1] and r[2] else 0.0)
        return [r[0] for r in rows]

    def winners_for_device(self, device_fingerprint: str) -> dict[str, tuple[str, dict[str, Any], dict[str, Any]]]:
        """{task key: (kind, config, signature)} for every winner on this device model: what a compile needs."""
        with self.session() as s:
            rows = s.execute(
                select(Task.key, Task.kind, Winner.config, Task.signature)
                .join(Winner, Winner.task_id == Task.id)
                .join(Device, Device.id == Winner.device_id)
                .where(Device.fingerprint == device_fingerprint)
            )
            return {key: (kind, config, sig) for key, kind, config, sig in rows if self.intact(config, sig)}

    def revision(self) -> tuple[Any, ...]:
        """A cheap marker of what :meth:`winners_for_device` would read: it changes whenever a winner or a task is
        added, changed or removed (a changed winner gets a newer ``updated_at``)."""
        with self.session() as s:
            winners = s.execute(select(func.count(Winner.id), func.max(Winner.id), func.max(Winner.updated_at))).one()
            tasks = s.execute(select(func.count(Task.id), func.max(Task.id))).one()
        return (*(str(v) for v in winners), *tasks)

    def top_winners(self, limit: int = 20) -> list[dict[str, Any]]:
        with self.session() as s:
            rows = s.execute(
                select(Task.name, Task.kind, Device.name, Winner.config, Winner.median_ms, Winner.baseline_ms, Task.signature,
                       Trial.spread_ms, Winner.task_id, Winner.device_id)
                .join(Winner, Winner.task_id == Task.id)
                .join(Device, Device.id == Winner.device_id)
                .outerjoin(Trial, Trial.id == Winner.trial_id)
            ).all()
            drift = _baseline_drift(s)
        out = [
            {
                "task": name,
                "kind": kind,
                "device": dev,
                "config": cfg,
                "median_ms": med,
                "baseline_ms": base,
                "speedup": (base / med) if med and base else None,
                "signature": sig,
                "iqr_ms": iqr,  # the winning trial's interquartile range of its timing samples (one timing window)
                "drift_ms": drift.get((tid, did)),  # how far the default's time moved between this task's trials
                "spread_ms": max((x for x in (iqr, drift.get((tid, did))) if x is not None), default=None),
            }
            for name, kind, dev, cfg, med, base, sig, iqr, tid, did in rows
            if self.intact(cfg, sig)
        ]
        out.sort(key=lambda r: -(r["speedup"] or 0.0))
        return out[:limit]

    def count(self) -> dict[str, int]:
        """How many tasks, trials and winners the database holds."""
        with self.session() as s:
            return _rows(s, _COUNTED)

    def stats(self) -> dict[str, Any]:
        with self.session() as s:
            by_status = dict(s.execute(select(Trial.status, func.count()).group_by(Trial.status)).all())
            by_kind = dict(s.execute(select(Task.kind, func.count()).group_by(Task.kind)).all())
            return {
                "url": self.safe_url,
                **_rows(s, (*_COUNTED, ("devices", Device), ("environments", Environment))),
                "trials_by_status": {k: int(v) for k, v in by_status.items()},
                "tasks_by_kind": {k: int(v) for k, v in by_kind.items()},
            }


_COUNTED = (("tasks", Task), ("trials", Trial), ("winners", Winner))  # what count() reports, and stats() first


def _rows(s: Session, tables: tuple[tuple[str, Any], ...]) -> dict[str, int]:
    """{name: row count} of each (name, ORM model)."""
    return {name: int(s.scalar(select(func.count()).select_from(model)) or 0) for name, model in tables}


def _trial_record(t: Trial) -> TrialRecord:
    return TrialRecord(t.id, t.config, t.status, t.median_ms, t.baseline_ms, t.error, t.spread_ms)


def _baseline_drift(s: Session) -> dict[tuple[int, int], float]:
    """{(task id, device id): max - min of the default's median over that task's measured trials}: the same code
    timed in different windows, so how far a re-measurement can land from one trial's time on this machine (issue
    17: on a 2-core CPU the default drifted 2.18-2.86 ms between trials whose own spreads were 0.06-1.0 ms)."""
    rows = s.execute(
        select(Trial.task_id, Trial.device_id, func.max(Trial.baseline_ms) - func.min(Trial.baseline_ms))
        .where(Trial.status == "ok", Trial.baseline_ms.is_not(None))
        .group_by(Trial.task_id, Trial.device_id)
        .having(func.count(Trial.baseline_ms) > 1)
    ).all()
    return {(tid, did): float(r) for tid, did, r in rows}
