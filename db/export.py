"""Export: a database's records (or one device's, one model's) as a portable JSON Lines file with a header, which
``transfer.py`` reads back, validates and applies."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import select

from tuner.db.models import Device, Environment, Task, Trial, Winner, WorkloadTask
from tuner.db.repository import Database
from tuner.errors import TunerError

FORMAT = "tuner-export"
SCHEMA = 1


def _iso(t: dt.datetime | None) -> str | None:
    return t.isoformat() if t else None


def export_records(db: Database, *, device: str | None = None, model: str | None = None) -> Iterator[dict[str, Any]]:
    """Every record as a plain dict, devices and tasks before the trials and winners that name them."""
    with db.session() as s:
        devices = [d for d in s.scalars(select(Device).order_by(Device.id))
                   if (device is None or device in d.fingerprint or device.lower() in d.name.lower()) and db.intact(d.info)]
        dev_ids = {d.id for d in devices}
        links = list(s.scalars(select(WorkloadTask).order_by(WorkloadTask.id)))
        if model is not None:
            links = [w for w in links if w.workload.split("/")[0] == model or w.workload.startswith(model)]
            task_ids = {w.task_id for w in links}
        else:
            task_ids = set(s.scalars(select(Task.id)))
        tasks = {t.id: t for t in s.scalars(select(Task).where(Task.id.in_(task_ids)).order_by(Task.id)) if db.intact(t.signature)}
        trials = [t for t in s.scalars(select(Trial).where(Trial.task_id.in_(tasks), Trial.device_id.in_(dev_ids)).order_by(Trial.id))
                  if db.intact(t.config)]
        env_ids = {t.environment_id for t in trials}
        envs = {e.id: e for e in s.scalars(select(Environment).where(Environment.id.in_(env_ids)))}
        winners = [w for w in s.scalars(select(Winner).where(Winner.task_id.in_(tasks), Winner.device_id.in_(dev_ids)).order_by(Winner.id))
                   if db.intact(w.config)]
        dev_fp = {d.id: d.fingerprint for d in devices}
        trial_uid = {t.id: t.uid for t in trials}
        yield {"type": "header", "format": FORMAT, "schema": SCHEMA, "tuner": _tuner_version(),
               "devices": [{"fingerprint": d.fingerprint, "name": d.name} for d in devices],
               "created_at": _iso(dt.datetime.now(dt.timezone.utc))}
        for d in devices:
            yield {"type": "device", "fingerprint": d.fingerprint, "kind": d.kind, "name": d.name, "info": d.info}
        for e in envs.values():
            yield {"type": "environment", "fingerprint": e.fingerprint, "torch": e.torch, "triton": e.triton,
                   "cuda": e.cuda, "python": e.python, "tuner": e.tuner}
        for t in tasks.values():
            yield {"type": "task", "key": t.key, "kind": t.kind, "name": t.name, "signature": t.signature,
                   "space_fingerprint": t.space_fingerprint}
        for w in links:
            if w.task_id in tasks:
                yield {"type": "workload", "workload": w.workload, "task": tasks[w.task_id].key, "position": w.position}
        for t in trials:
            yield {"type": "trial", "uid": t.uid, "task": tasks[t.task_id].key, "device": dev_fp[t.device_id],
                   "environment": envs[t.environment_id].fingerprint, "config": t.config, "status": t.status,
                   "median_ms": t.median_ms, "min_ms": t.min_ms, "spread_ms": t.spread_ms, "baseline_ms": t.baseline_ms,
                   "error": t.error, "host": t.host, "created_at": _iso(t.created_at)}
        for w in winners:
            yield {"type": "winner", "task": tasks[w.task_id].key, "device": dev_fp[w.device_id],
                   "trial": trial_uid.get(w.trial_id) if w.trial_id else None, "config": w.config,
                   "median_ms": w.median_ms, "baseline_ms": w.baseline_ms}


def _tuner_version() -> str:
    from tuner.version import __version__

    return __version__


def write_export(records: Iterable[dict[str, Any]], path: Path) -> dict[str, int]:
    """Write to a temporary name beside ``path`` and rename: a reader never sees half a file."""
    counts: dict[str, int] = {}
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(tmp, "wt", encoding="utf-8") as f:  # type: ignore[operator]
            for r in records:
                f.write(json.dumps(r, sort_keys=True, allow_nan=False) + "\n")
                counts[r["type"]] = counts.get(r["type"], 0) + 1
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise TunerError(f"cannot write {path}: {e.strerror or e}") from None
    counts.pop("header", None)
    return counts


# --- import: read and validate everything first ---------------------------------------------------


__all__ = ["FORMAT", "SCHEMA", "export_records", "write_export"]
