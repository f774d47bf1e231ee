"""What Optuna's dashboard shows of tuner's studies: each study's name, and a settled task's times and winner."""

from __future__ import annotations

from typing import Any

from tuner.core import TaskOutcome
from tuner.db import TaskRecord
from tuner.keys import canonical_json


def study_name(tuning: Any, task: TaskRecord) -> str:
    """A task's study, named so that a person reading Optuna's dashboard knows it: the task's readable name, its kind
    and the starts of its key and device (unique as the key is). A study made before these names keeps its old one."""
    legacy = f"tuner:{task.key}:{tuning.device_fingerprint[:16]}"
    try:
        tuning.storage.get_study_id_from_name(legacy)
        return legacy
    except KeyError:
        return f"{task.name} [{task.kind}] {task.key[:12]}@{tuning.device_fingerprint[:8]}"


def annotate_study(tuning: Any, task: TaskRecord, outcome: TaskOutcome) -> None:
    """What the dashboard shows of a settled task: its default and best times and the winner, as user attributes."""
    try:
        study_id = tuning.storage.get_study_id_from_name(study_name(tuning, task))
    except KeyError:
        return  # settled without a study of its own (nothing measured here)
    attrs = {
        "task": task.name,
        "kind": task.kind,
        "default_ms": outcome.default_ms,
        "best_ms": outcome.best_ms,
        "speedup": outcome.speedup,
        "winner": "Inductor's default" if outcome.is_default else canonical_json(outcome.winner),
    }
    for k, v in attrs.items():
        tuning.storage.set_study_user_attr(study_id, k, v)
