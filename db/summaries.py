"""Read-only summaries of a tuning database for ``tuner report``: winners per task and trials by status, optionally
for one model's workloads."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from tuner.db.models import Device, Environment, Task, Trial, Winner, WorkloadTask
from tuner.db.repository import Database


def _of_model(query: Any, model: str | None) -> Any:
    if model is None:
        return query
    tasks = select(WorkloadTask.task_id).where(WorkloadTask.workload.startswith(f"{model}/"))
    return query.where(Task.id.in_(tasks))


def winner_rows(db: Database, model: str | None = None) -> list[dict[str, Any]]:
    """Every task with a winner: its name, kind, device, default and best times and the winning config."""
    q = select(Task.name, Task.kind, Device.name, Winner.baseline_ms, Winner.median_ms, Winner.config).join(
        Winner, Winner.task_id == Task.id
    )
    with db.session() as s:
        rows = s.execute(_of_model(q.join(Device, Device.id == Winner.device_id), model)).all()
    return [
        {"task": t, "kind": k, "device": d, "default_ms": b, "best_ms": m, "config": c}
        for t, k, d, b, m, c in rows
        if db.intact(c)
    ]


def trial_statuses(db: Database, model: str | None = None, samples: int = 3) -> dict[str, dict[str, Any]]:
    """{status: {"count", "errors": up to ``samples`` distinct messages}} over the trials of these tasks."""
    with db.session() as s:
        counts = s.execute(
            _of_model(select(Trial.status, func.count()).join(Task, Task.id == Trial.task_id), model).group_by(
                Trial.status
            )
        ).all()
        out = {str(st): {"count": int(n), "errors": []} for st, n in counts}
        errors = s.execute(
            _of_model(select(Trial.status, Trial.error).join(Task, Task.id == Trial.task_id), model)
            .where(Trial.error.is_not(None))
            .distinct()
            .limit(200)
        ).all()
    for st, err in errors:
        bucket = out[str(st)]["errors"]
        line = str(err).strip().splitlines()[0][:300] if err else ""
        if line and line not in bucket and len(bucket) < samples:
            bucket.append(line)
    return out


def provenance(db: Database) -> dict[str, list[dict[str, Any]]]:
    """The devices and software environments the trials were measured on."""
    with db.session() as s:
        devices = [
            {"name": n, "kind": k, "info": i}
            for n, k, i in s.execute(select(Device.name, Device.kind, Device.info))
            if db.intact(i)
        ]
        envs = [
            {"torch": t, "triton": tr, "cuda": c, "python": p, "tuner": v}
            for t, tr, c, p, v in s.execute(
                select(Environment.torch, Environment.triton, Environment.cuda, Environment.python, Environment.tuner)
            )
        ]
    return {"devices": devices, "environments": envs}


__all__ = ["provenance", "trial_statuses", "winner_rows"]
