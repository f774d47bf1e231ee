"""Tuning database: typed ORM, Alembic migrations, the repository API, fingerprints."""

from tuner.db.fingerprint import DeviceInfo, EnvironmentInfo, current_device, current_environment
from tuner.db.repository import Database, TaskRecord, TrialRecord

__all__ = [
    "Database",
    "DeviceInfo",
    "EnvironmentInfo",
    "TaskRecord",
    "TrialRecord",
    "current_device",
    "current_environment",
]
