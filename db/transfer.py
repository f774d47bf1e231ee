"""Portable tuning files: JSON Lines (gzip when the name ends in .gz) with a header line.

Nothing read is trusted: every line is parsed as plain JSON (never unpickled or executed), checked
for its fields and types, and every config is validated against its task's search space. A file is
applied all-or-nothing in one transaction, and importing it twice changes nothing.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select

from tuner.core import Status
from tuner.db.fingerprint import DeviceInfo, EnvironmentInfo
from tuner.db.models import Device, Environment, Task, Trial, Winner, WorkloadTask
from tuner.db.repository import Database
from tuner.errors import TunerError
from tuner.keys import config_hash

FORMAT = "tuner-export"
SCHEMA = 1
MAX_LINE = 1 << 20  # bytes; a longer line is refused before it is parsed
STATUSES = {s.value for s in Status}
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class ImportRefused(TunerError):
    """A file that is not a valid tuner export; nothing was written."""


# --- export ---------------------------------------------------------------------------------------
def _iso(t: dt.datetime | None) -> str | None:
    return t.isoformat() if t else None


def export_records(db: Database, *, device: str | None = None, model: str | None = None) -> Iterator[dict[str, Any]]:
    """Every record as a plain dict, devices and tasks before the trials and winners that name them."""
    with db.session() as s:
        devices = [d for d in s.scalars(select(Device).order_by(Device.id))
                   if device is None or device in d.fingerprint or device.lower() in d.name.lower()]
        dev_ids = {d.id for d in devices}
        links = list(s.scalars(select(WorkloadTask).order_by(WorkloadTask.id)))
        if model is not None:
            links = [w for w in links if w.workload.split("/")[0] == model or w.workload.startswith(model)]
            task_ids = {w.task_id for w in links}
        else:
            task_ids = set(s.scalars(select(Task.id)))
        tasks = {t.id: t for t in s.scalars(select(Task).where(Task.id.in_(task_ids)).order_by(Task.id))}
        trials = list(s.scalars(select(Trial).where(Trial.task_id.in_(task_ids), Trial.device_id.in_(dev_ids)).order_by(Trial.id)))
        env_ids = {t.environment_id for t in trials}
        envs = {e.id: e for e in s.scalars(select(Environment).where(Environment.id.in_(env_ids)))}
        winners = list(s.scalars(select(Winner).where(Winner.task_id.in_(task_ids), Winner.device_id.in_(dev_ids)).order_by(Winner.id)))
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
    from tuner import __version__

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
@dataclass
class ImportPlan:
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)
    environments: dict[str, dict[str, Any]] = field(default_factory=dict)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    workloads: list[dict[str, Any]] = field(default_factory=list)
    trials: list[dict[str, Any]] = field(default_factory=list)
    winners: list[dict[str, Any]] = field(default_factory=list)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        raw = gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")
    except OSError as e:
        raise ImportRefused(f"cannot read {path}: {e.strerror or e}") from None
    try:
        with raw as f:
            n = 0
            while True:
                line = f.readline(MAX_LINE + 1)
                if not line:
                    return
                n += 1
                if len(line) > MAX_LINE:
                    raise ImportRefused(f"{path}: line {n} is longer than {MAX_LINE} bytes")
                if not line.endswith(b"\n"):
                    raise ImportRefused(f"{path}: line {n} is truncated (no end of line)")
                try:
                    yield n, line.decode("utf-8")
                except UnicodeDecodeError:
                    raise ImportRefused(f"{path}: line {n} is not UTF-8") from None
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise ImportRefused(f"{path}: cannot read the file: {e}") from None


def _need(rec: dict[str, Any], n: int, name: str, kind: type | tuple[type, ...], *, optional: bool = False, limit: int = 200) -> Any:
    v = rec.get(name)
    if v is None and optional:
        return None
    if isinstance(v, bool) and kind in (int, float, (int, float)):
        raise ImportRefused(f"line {n}: {rec.get('type')} field {name!r} must be a number")
    if not isinstance(v, kind):
        raise ImportRefused(f"line {n}: {rec.get('type')} field {name!r} is missing or of the wrong type")
    if isinstance(v, str) and len(v) > limit:
        raise ImportRefused(f"line {n}: {rec.get('type')} field {name!r} is too long")
    if isinstance(v, float) and not math.isfinite(v):
        raise ImportRefused(f"line {n}: {rec.get('type')} field {name!r} is not finite")
    return v


def _ms(rec: dict[str, Any], n: int, name: str) -> float | None:
    v = _need(rec, n, name, (int, float), optional=True)
    if v is not None and v < 0:
        raise ImportRefused(f"line {n}: {name} must not be negative")
    return None if v is None else float(v)


def _key(rec: dict[str, Any], n: int, name: str) -> str:
    v = _need(rec, n, name, str)
    if not _HEX64.match(v):
        raise ImportRefused(f"line {n}: {rec['type']} field {name!r} is not a 64-digit hex key")
    return v


def read_import(path: Path, known_tasks: dict[str, tuple[str, dict[str, Any]]] | None = None) -> ImportPlan:
    """Parse and validate ``path`` completely; raises :class:`ImportRefused` at the first problem."""
    from tuner.search_spaces import InvalidConfig, space_for

    plan = ImportPlan()
    known = dict(known_tasks or {})
    spaces: dict[str, Any] = {}
    header = False
    for n, text in _lines(path):
        try:
            rec = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        except ValueError as e:
            raise ImportRefused(f"line {n} is not valid JSON: {e}") from None
        if not isinstance(rec, dict):
            raise ImportRefused(f"line {n}: a record must be a JSON object")
        kind = rec.get("type")
        if not header:
            if kind != "header" or rec.get("format") != FORMAT:
                raise ImportRefused(f"{path} is not a tuner export (no header line)")
            if rec.get("schema") != SCHEMA:
                raise ImportRefused(f"{path} has export schema {rec.get('schema')!r}; this tuner reads schema {SCHEMA}")
            header = True
            continue
        if kind == "device":
            fp = _key(rec, n, "fingerprint")
            plan.devices[fp] = {"kind": _need(rec, n, "kind", str, limit=16), "name": _need(rec, n, "name", str),
                                "info": _need(rec, n, "info", dict)}
            if DeviceInfo(**plan.devices[fp]).fingerprint != fp:
                raise ImportRefused(f"line {n}: device fingerprint does not match its kind, name and info")
        elif kind == "environment":
            fp = _key(rec, n, "fingerprint")
            plan.environments[fp] = {k: _need(rec, n, k, str, optional=k in ("triton", "cuda"), limit=64)
                                     for k in ("torch", "triton", "cuda", "python", "tuner")}
            if EnvironmentInfo(**plan.environments[fp]).fingerprint != fp:
                raise ImportRefused(f"line {n}: environment fingerprint does not match its versions")
        elif kind == "task":
            key = _key(rec, n, "key")
            t_kind, sig = _need(rec, n, "kind", str, limit=32), _need(rec, n, "signature", dict)
            try:
                spaces[key] = space_for(t_kind, sig)
            except InvalidConfig as e:
                raise ImportRefused(f"line {n}: task {key[:12]}: {e}") from None
            plan.tasks[key] = {"kind": t_kind, "name": _need(rec, n, "name", str), "signature": sig,
                               "space_fingerprint": _need(rec, n, "space_fingerprint", str, limit=64)}
            known[key] = (t_kind, sig)
        elif kind == "workload":
            key = _key(rec, n, "task")
            if key not in known:
                raise ImportRefused(f"line {n}: workload names unknown task {key[:12]}")
            plan.workloads.append({"workload": _need(rec, n, "workload", str, limit=300), "task": key,
                                   "position": _need(rec, n, "position", int)})
        elif kind in ("trial", "winner"):
            key = _key(rec, n, "task")
            if key not in known:
                raise ImportRefused(f"line {n}: {kind} names unknown task {key[:12]}")
            dev = _key(rec, n, "device")
            if dev not in plan.devices:
                raise ImportRefused(f"line {n}: {kind} names a device the file does not define")
            config = _need(rec, n, "config", dict)
            space = spaces.get(key) or space_for(*known[key])
            spaces[key] = space
            status = _need(rec, n, "status", str, limit=16) if kind == "trial" else "ok"
            if status not in STATUSES:
                raise ImportRefused(f"line {n}: unknown trial status {status!r}")
            if status != "invalid" or kind == "winner":
                try:
                    space.validate(config)
                except InvalidConfig as e:
                    raise ImportRefused(f"line {n}: {kind} config for task {key[:12]}: {e}") from None
            row = {"task": key, "device": dev, "config": config, "median_ms": _ms(rec, n, "median_ms"),
                   "baseline_ms": _ms(rec, n, "baseline_ms")}
            if kind == "trial":
                env = _key(rec, n, "environment")
                if env not in plan.environments:
                    raise ImportRefused(f"line {n}: trial names an environment the file does not define")
                uid = _need(rec, n, "uid", str, limit=36)
                row.update(uid=uid, environment=env, status=status, min_ms=_ms(rec, n, "min_ms"),
                           spread_ms=_ms(rec, n, "spread_ms"), error=_need(rec, n, "error", str, optional=True, limit=4000),
                           host=_need(rec, n, "host", str))
                plan.trials.append(row)
            else:
                row["trial"] = _need(rec, n, "trial", str, optional=True, limit=36)
                plan.winners.append(row)
        else:
            raise ImportRefused(f"line {n}: unknown record type {kind!r}")
    if not header:
        raise ImportRefused(f"{path} is empty")
    return plan


# --- import: apply in one transaction --------------------------------------------------------------
def apply_import(db: Database, plan: ImportPlan) -> dict[str, int]:
    """Insert what is new; all or nothing. A winner replaces the stored one only with a larger verified speedup."""
    added = {"devices": 0, "environments": 0, "tasks": 0, "trials": 0, "winners": 0}
    with db.session() as s:
        dev_id = {fp: _ensure(s, Device, "fingerprint", fp, d, added, "devices") for fp, d in plan.devices.items()}
        env_id = {fp: _ensure(s, Environment, "fingerprint", fp, e, added, "environments") for fp, e in plan.environments.items()}
        keys = set(plan.tasks) | {t["task"] for t in plan.trials} | {w["task"] for w in plan.winners} | {w["task"] for w in plan.workloads}
        task_id = {key: _ensure(s, Task, "key", key, plan.tasks.get(key, {}), added, "tasks") for key in keys}
        for w in plan.workloads:
            exists = s.scalar(select(WorkloadTask.id).where(WorkloadTask.workload == w["workload"], WorkloadTask.task_id == task_id[w["task"]]))
            if exists is None:
                s.add(WorkloadTask(workload=w["workload"], task_id=task_id[w["task"]], position=w["position"]))
        have = set(s.scalars(select(Trial.uid).where(Trial.uid.in_([t["uid"] for t in plan.trials])))) if plan.trials else set()
        trial_id: dict[str, int] = {}
        for t in plan.trials:
            if t["uid"] in have:
                continue
            row = Trial(uid=t["uid"], task_id=task_id[t["task"]], device_id=dev_id[t["device"]], environment_id=env_id[t["environment"]],
                        config=t["config"], config_hash=config_hash(t["config"]), status=t["status"], median_ms=t["median_ms"],
                        min_ms=t["min_ms"], spread_ms=t["spread_ms"], baseline_ms=t["baseline_ms"], error=t["error"], host=t["host"])
            s.add(row)
            s.flush()
            trial_id[t["uid"]] = row.id
            have.add(t["uid"])
            added["trials"] += 1
        for w in plan.winners:
            tid, did = task_id[w["task"]], dev_id[w["device"]]
            cur = s.scalar(select(Winner).where(Winner.task_id == tid, Winner.device_id == did))
            if cur is not None and _speedup(cur.median_ms, cur.baseline_ms) >= _speedup(w["median_ms"], w["baseline_ms"]):
                continue
            ref = None
            if w["trial"]:
                ref = trial_id.get(w["trial"]) or s.scalar(select(Trial.id).where(Trial.uid == w["trial"]))
            if cur is None:
                cur = Winner(task_id=tid, device_id=did)
                s.add(cur)
            cur.trial_id, cur.config, cur.median_ms, cur.baseline_ms = ref, w["config"], w["median_ms"], w["baseline_ms"]
            added["winners"] += 1
    return added


def _ensure(s: Any, model: Any, column: str, value: str, values: dict[str, Any], added: dict[str, int], count: str) -> int:
    """The id of the row whose ``column`` is ``value``, inserted from ``values`` when missing."""
    row = s.scalar(select(model).where(getattr(model, column) == value))
    if row is None:
        row = model(**{column: value}, **values)
        s.add(row)
        s.flush()
        added[count] += 1
    return row.id


def _speedup(median: float | None, baseline: float | None) -> float:
    return baseline / median if median and baseline else 1.0


def known_tasks(db: Database) -> dict[str, tuple[str, dict[str, Any]]]:
    with db.session() as s:
        return {k: (kind, sig) for k, kind, sig in s.execute(select(Task.key, Task.kind, Task.signature))}


def merge(src: Database, dst: Database) -> dict[str, int]:
    """Database to database, through the same validation as a file."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "merge.jsonl"
        write_export(export_records(src), path)
        return apply_import(dst, read_import(path, known_tasks(dst)))
