"""SQLAlchemy 2 typed ORM models.

What was tuned (a :class:`Task`) is kept apart from what was measured (a
:class:`Trial`); :class:`Winner` rows are derived from trials and can be
recomputed. Every table is prefixed ``tuner_`` so Optuna's own tables (its
studies live in the same database) never collide with ours.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import DateTime, Float, ForeignKey, Index, Integer, MetaData, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from tuner.db.cells import SafeJSON

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

JSONType = SafeJSON()  # JSONB on PostgreSQL; a damaged SQLite cell reads as ``Unreadable``


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Device(Base):
    __tablename__ = "tuner_devices"
    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[str] = mapped_column(String(16))  # cpu | cuda
    name: Mapped[str] = mapped_column(String(200))
    info: Mapped[dict[str, Any]] = mapped_column(JSONType)


class Environment(Base):
    __tablename__ = "tuner_environments"
    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    torch: Mapped[str] = mapped_column(String(64))
    triton: Mapped[str | None] = mapped_column(String(64))
    cuda: Mapped[str | None] = mapped_column(String(64))
    python: Mapped[str] = mapped_column(String(32))
    tuner: Mapped[str] = mapped_column(String(32))


class Task(Base):
    __tablename__ = "tuner_tasks"
    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[str] = mapped_column(String(32), index=True)
    name: Mapped[str] = mapped_column(String(200))
    signature: Mapped[dict[str, Any]] = mapped_column(JSONType)
    space_fingerprint: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Trial(Base):
    __tablename__ = "tuner_trials"
    __table_args__ = (Index("ix_tuner_trials_lookup", "task_id", "device_id", "config_hash"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    uid: Mapped[str] = mapped_column(String(36), unique=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tuner_tasks.id", ondelete="CASCADE"))
    device_id: Mapped[int] = mapped_column(ForeignKey("tuner_devices.id"))
    environment_id: Mapped[int] = mapped_column(ForeignKey("tuner_environments.id"))
    config: Mapped[dict[str, Any]] = mapped_column(JSONType)
    config_hash: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))
    median_ms: Mapped[float | None] = mapped_column(Float)
    min_ms: Mapped[float | None] = mapped_column(Float)
    spread_ms: Mapped[float | None] = mapped_column(Float)
    baseline_ms: Mapped[float | None] = mapped_column(Float)  # the default, timed in the same run
    error: Mapped[str | None] = mapped_column(Text)
    host: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    task: Mapped[Task] = relationship()


class Winner(Base):
    __tablename__ = "tuner_winners"
    __table_args__ = (UniqueConstraint("task_id", "device_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tuner_tasks.id", ondelete="CASCADE"))
    device_id: Mapped[int] = mapped_column(ForeignKey("tuner_devices.id"))
    trial_id: Mapped[int | None] = mapped_column(ForeignKey("tuner_trials.id", ondelete="SET NULL"))
    config: Mapped[dict[str, Any]] = mapped_column(JSONType)
    median_ms: Mapped[float | None] = mapped_column(Float)
    baseline_ms: Mapped[float | None] = mapped_column(Float)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)

    task: Mapped[Task] = relationship()
    device: Mapped[Device] = relationship()


class WorkloadTask(Base):
    """Which tasks a workload (model, mode, shape, dtype) produced, with their share of its time."""

    __tablename__ = "tuner_workload_tasks"
    __table_args__ = (UniqueConstraint("workload", "task_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    workload: Mapped[str] = mapped_column(String(300), index=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tuner_tasks.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer, default=0)


class Claim(Base):
    """A worker's hold on (task, device) while it tunes it; ``done_target`` marks it finished up to that many trials."""

    __tablename__ = "tuner_claims"
    __table_args__ = (UniqueConstraint("task_id", "device_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tuner_tasks.id", ondelete="CASCADE"))
    device_id: Mapped[int] = mapped_column(ForeignKey("tuner_devices.id"))
    worker: Mapped[str] = mapped_column(String(200))
    expires_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    done_target: Mapped[int | None] = mapped_column(Integer)
