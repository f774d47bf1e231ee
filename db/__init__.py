"""Tuning database: typed ORM, Alembic migrations, the repository API, fingerprints.

The repository (SQLAlchemy and the ORM) is imported when first asked for: a measurement worker reads only the
fingerprints (``tuner.db.fingerprint``), and on the H200's host each import counts in the capture's start."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuner.db.fingerprint import DeviceInfo, EnvironmentInfo, current_device, current_environment

if TYPE_CHECKING:
    from tuner.db.repository import Database, TaskRecord, TrialRecord

_REPOSITORY = ("Database", "TaskRecord", "TrialRecord")


def __getattr__(name: str) -> Any:
    if name in _REPOSITORY:
        from tuner.db import repository

        return getattr(repository, name)
    raise AttributeError(f"module 'tuner.db' has no attribute {name!r}")


__all__ = [
    "Database",
    "DeviceInfo",
    "EnvironmentInfo",
    "TaskRecord",
    "TrialRecord",
    "current_device",
    "current_environment",
]
