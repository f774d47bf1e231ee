"""Portable tuning files: JSON Lines (gzip when the name ends in .gz) with a header line.

Nothing read is trusted: every line is parsed as plain JSON (never unpickled or executed), checked
for its fields and types, and every config is validated against its task's search space. A file is
applied all-or-nothing in one transaction, and importing it twice changes nothing.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select

from tuner.core import Status
from tuner.db.export import FORMAT, SCHEMA, export_records, write_export
from tuner.db.fingerprint import DeviceInfo, EnvironmentInfo
from tuner.db.models import Device, Environment, Task, Trial, Winner, WorkloadTask
from tuner.db.repository import Database
from tuner.errors import TunerError
from tuner.keys import config_hash

MAX_LINE = 1 << 20  # bytes; a longer line is refused before it is parsed
STATUSES = {s.value for s in Status}
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class ImportRefused(TunerError):
    """A file that is not a valid tuner export; nothing was written."""


# --- export ---------------------------------------------------------------------------------------
@dataclass
class ImportPlan:
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)
    environments: dict[str, dict[str, Any]] = field(default_factory=dict)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    workloads: list[dict[str, Any]] = field(default_factory=list)
    trials: list[dict[str, Any]] = field(default_factory=list)
    winners: list[dict[str, Any]] = field(default_factory=list)
    defaults: list[dict[str, Any]] = field(default_factory=list)  # winners that are their task's default, no trial needed
    unbacked: int = 0  # winners with no measured trial of theirs in the file: never applied


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


def _record(text: str, n: int) -> dict[str, Any]:
    try:
        rec = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except ValueError as e:
        raise ImportRefused(f"line {n} is not valid JSON: {e}") from None
    except RecursionError:
        raise ImportRefused(f"line {n} nests its JSON too deeply") from None
    if not isinstance(rec, dict):
        raise ImportRefused(f"line {n}: a record must be a JSON object")
    return rec


class _Reader:
    """Validates a file's records in order. A task this database already holds keeps its own kind and signature: the
    file's are ignored, and every config is validated against the space this tuner builds from what it holds. A task
    new here is admitted only where its signature builds a space (known Inductor flags, values a device allows)."""

    def __init__(self, known: dict[str, tuple[str, dict[str, Any]]]):
        self.plan = ImportPlan()
        self.known = dict(known)
        self.local = set(known)
        self.spaces: dict[str, Any] = {}
        self.trials: dict[str, dict[str, Any]] = {}  # by uid: what a winner line names

    def space(self, key: str, n: int) -> Any:
        from tuner.search_spaces import InvalidConfig, space_for

        if key not in self.spaces:
            try:
                self.spaces[key] = space_for(*self.known[key])
            except InvalidConfig as e:
                raise ImportRefused(f"line {n}: task {key[:12]}: {e}") from None
        return self.spaces[key]

    def device(self, rec: dict[str, Any], n: int) -> None:
        fp = _key(rec, n, "fingerprint")
        d = {"kind": _need(rec, n, "kind", str, limit=16), "name": _need(rec, n, "name", str), "info": _need(rec, n, "info", dict)}
        if DeviceInfo(**d).fingerprint != fp:
            raise ImportRefused(f"line {n}: device fingerprint does not match its kind, name and info")
        self.plan.devices[fp] = d

    def environment(self, rec: dict[str, Any], n: int) -> None:
        fp = _key(rec, n, "fingerprint")
        e = {k: _need(rec, n, k, str, optional=k in ("triton", "cuda"), limit=64) for k in ("torch", "triton", "cuda", "python", "tuner")}
        if EnvironmentInfo(**e).fingerprint != fp:
            raise ImportRefused(f"line {n}: environment fingerprint does not match its versions")
        self.plan.environments[fp] = e

    def task(self, rec: dict[str, Any], n: int) -> None:
        key = _key(rec, n, "key")
        kind, sig = _need(rec, n, "kind", str, limit=32), _need(rec, n, "signature", dict)
        if key in self.local:
            if self.known[key][0] != kind:
                raise ImportRefused(f"line {n}: task {key[:12]} is a {self.known[key][0]} task here, not {kind}")
            return  # ours: its signature stays ours
        self.known[key] = (kind, sig)
        self.space(key, n)
        self.plan.tasks[key] = {"kind": kind, "name": _need(rec, n, "name", str), "signature": sig,
                                "space_fingerprint": _need(rec, n, "space_fingerprint", str, limit=64)}

    def workload(self, rec: dict[str, Any], n: int) -> None:
        key = _key(rec, n, "task")
        if key not in self.known:
            raise ImportRefused(f"line {n}: workload names unknown task {key[:12]}")
        self.plan.workloads.append({"workload": _need(rec, n, "workload", str, limit=300), "task": key,
                                    "position": _need(rec, n, "position", int)})

    def measured(self, rec: dict[str, Any], n: int, kind: str) -> dict[str, Any]:
        """What a trial and a winner share: a known task and device, and a config valid in the task's space."""
        key = _key(rec, n, "task")
        if key not in self.known:
            raise ImportRefused(f"line {n}: {kind} names unknown task {key[:12]}")
        dev = _key(rec, n, "device")
        if dev not in self.plan.devices:
            raise ImportRefused(f"line {n}: {kind} names a device the file does not define")
        config = _need(rec, n, "config", dict)
        status = _need(rec, n, "status", str, limit=16) if kind == "trial" else "ok"
        if status not in STATUSES:
            raise ImportRefused(f"line {n}: unknown trial status {status!r}")
        if status != "invalid":
            from tuner.search_spaces import InvalidConfig

            try:
                self.space(key, n).validate(config)
            except InvalidConfig as e:
                raise ImportRefused(f"line {n}: {kind} config for task {key[:12]}: {e}") from None
        return {"task": key, "device": dev, "config": config, "status": status, "median_ms": _ms(rec, n, "median_ms"),
                "baseline_ms": _ms(rec, n, "baseline_ms")}

    def trial(self, rec: dict[str, Any], n: int) -> None:
        row = self.measured(rec, n, "trial")
        env = _key(rec, n, "environment")
        if env not in self.plan.environments:
            raise ImportRefused(f"line {n}: trial names an environment the file does not define")
        row.update(uid=_need(rec, n, "uid", str, limit=36), environment=env, min_ms=_ms(rec, n, "min_ms"),
                   spread_ms=_ms(rec, n, "spread_ms"), error=_need(rec, n, "error", str, optional=True, limit=4000),
                   host=_need(rec, n, "host", str))
        self.plan.trials.append(row)
        self.trials[row["uid"]] = row

    def winner(self, rec: dict[str, Any], n: int) -> None:
        """A winner stands on its own trial in the file (measured, of this task, device and config) and takes that
        trial's times; a claim with none is counted and never applied. A task's default (Inductor's own choice, as
        its space says) needs no trial: a sweep stores it as the answer of a task it did not measure, and a compile
        that finds it neither counts a miss nor falls back to Inductor's runtime autotuning."""
        row = self.measured(rec, n, "winner")
        uid = _need(rec, n, "trial", str, optional=True, limit=36)
        trial = self.trials.get(uid) if uid else None
        if trial is None or speedup_of(trial) is None or any(trial[k] != row[k] for k in ("task", "device", "config")):
            if row["config"] == self.space(row["task"], n).default:
                self.plan.defaults.append({**row, "median_ms": None, "baseline_ms": None})
            else:
                self.plan.unbacked += 1
            return
        row.update(trial=uid, median_ms=trial["median_ms"], baseline_ms=trial["baseline_ms"])
        self.plan.winners.append(row)


def speedup_of(trial: dict[str, Any]) -> float | None:
    """A measured trial's default time over its own: None for a trial that did not run or lacks either time."""
    if trial.get("status") != "ok" or not trial.get("median_ms") or not trial.get("baseline_ms"):
        return None
    return trial["baseline_ms"] / trial["median_ms"]


def read_import(path: Path, known_tasks: dict[str, tuple[str, dict[str, Any]]] | None = None) -> ImportPlan:
    """Parse and validate ``path`` completely; raises :class:`ImportRefused` at the first problem. ``known_tasks``:
    the importing database's tasks, whose own kinds and signatures the file cannot change."""
    reader = _Reader(known_tasks or {})
    handlers = {"device": reader.device, "environment": reader.environment, "task": reader.task, "workload": reader.workload,
                "trial": reader.trial, "winner": reader.winner}
    header = False
    for n, text in _lines(path):
        rec = _record(text, n)
        if not header:
            if rec.get("type") != "header" or rec.get("format") != FORMAT:
                raise ImportRefused(f"{path} is not a tuner export (no header line)")
            if rec.get("schema") != SCHEMA:
                raise ImportRefused(f"{path} has export schema {rec.get('schema')!r}; this tuner reads schema {SCHEMA}")
            header = True
            continue
        handle = handlers.get(rec.get("type"))  # type: ignore[arg-type]
        if handle is None:
            raise ImportRefused(f"line {n}: unknown record type {str(rec.get('type'))[:40]!r}")
        handle(rec, n)
    if not header:
        raise ImportRefused(f"{path} is empty")
    return reader.plan


# --- import: apply in one transaction --------------------------------------------------------------
def apply_import(db: Database, plan: ImportPlan) -> dict[str, int]:
    """Insert what is new; all or nothing. An imported winner replaces a stored one only where its own trial shows a
    larger speedup than the stored winner's trial (a stored winner with no trial yields to a measured one)."""
    added = {"devices": 0, "environments": 0, "tasks": 0, "trials": 0, "winners": 0}
    with db.session() as s:
        dev_id = {fp: _ensure(s, Device, "fingerprint", fp, d, added, "devices") for fp, d in plan.devices.items()}
        env_id = {fp: _ensure(s, Environment, "fingerprint", fp, e, added, "environments") for fp, e in plan.environments.items()}
        keys = set(plan.tasks) | {t["task"] for t in plan.trials} | {w["task"] for w in [*plan.winners, *plan.defaults, *plan.workloads]}
        task_id = {key: _ensure(s, Task, "key", key, plan.tasks.get(key, {}), added, "tasks") for key in keys}
        for w in plan.workloads:
            exists = s.scalar(select(WorkloadTask.id).where(WorkloadTask.workload == w["workload"], WorkloadTask.task_id == task_id[w["task"]]))
            if exists is None:
                s.add(WorkloadTask(workload=w["workload"], task_id=task_id[w["task"]], position=w["position"]))
        trial_id = _add_trials(s, plan, task_id, dev_id, env_id, added)
        for w in plan.winners:
            tid, did = task_id[w["task"]], dev_id[w["device"]]
            cur = s.scalar(select(Winner).where(Winner.task_id == tid, Winner.device_id == did))
            if cur is not None and _stored_speedup(s, cur) >= speedup_of(w):  # type: ignore[operator]
                continue
            if cur is None:
                cur = Winner(task_id=tid, device_id=did)
                s.add(cur)
            cur.trial_id, cur.config, cur.median_ms, cur.baseline_ms = trial_id[w["trial"]], w["config"], w["median_ms"], w["baseline_ms"]
            added["winners"] += 1
        _add_defaults(s, plan, task_id, dev_id, added)
    return added


def _add_defaults(s: Any, plan: ImportPlan, task_id: dict[str, int], dev_id: dict[str, int], added: dict[str, int]) -> None:
    """Each task's default as its answer where the database has no winner for it: never in place of one."""
    for w in plan.defaults:
        tid, did = task_id[w["task"]], dev_id[w["device"]]
        if s.scalar(select(Winner.id).where(Winner.task_id == tid, Winner.device_id == did)) is None:
            s.add(Winner(task_id=tid, device_id=did, trial_id=None, config=w["config"]))
            s.flush()
            added["winners"] += 1


def _add_trials(s: Any, plan: ImportPlan, task_id: dict[str, int], dev_id: dict[str, int], env_id: dict[str, int],
                added: dict[str, int]) -> dict[str, int]:
    """Insert the trials not stored yet; {uid: row id} of every trial of the file."""
    uids = [t["uid"] for t in plan.trials]
    have = dict(s.execute(select(Trial.uid, Trial.id).where(Trial.uid.in_(uids))).tuples().all()) if uids else {}
    for t in plan.trials:
        if t["uid"] in have:
            continue
        row = Trial(uid=t["uid"], task_id=task_id[t["task"]], device_id=dev_id[t["device"]], environment_id=env_id[t["environment"]],
                    config=t["config"], config_hash=config_hash(t["config"]), status=t["status"], median_ms=t["median_ms"],
                    min_ms=t["min_ms"], spread_ms=t["spread_ms"], baseline_ms=t["baseline_ms"], error=t["error"], host=t["host"])
        s.add(row)
        s.flush()
        have[t["uid"]] = row.id
        added["trials"] += 1
    return have


def _stored_speedup(s: Any, winner: Winner) -> float:
    """A stored winner's speedup by its own trial; 0 where it stands on none (a default that nothing measured)."""
    trial = s.get(Trial, winner.trial_id) if winner.trial_id else None
    if trial is None:
        return 0.0
    return speedup_of({"status": trial.status, "median_ms": trial.median_ms, "baseline_ms": trial.baseline_ms}) or 0.0


def _ensure(s: Any, model: Any, column: str, value: str, values: dict[str, Any], added: dict[str, int], count: str) -> int:
    """The id of the row whose ``column`` is ``value``, inserted from ``values`` when missing."""
    row = s.scalar(select(model).where(getattr(model, column) == value))
    if row is None:
        row = model(**{column: value}, **values)
        s.add(row)
        s.flush()
        added[count] += 1
    return row.id


def known_tasks(db: Database) -> dict[str, tuple[str, dict[str, Any]]]:
    """The database's tasks, {key: (kind, signature)}; one whose signature cannot be read is left to the file."""
    with db.session() as s:
        return {k: (kind, sig) for k, kind, sig in s.execute(select(Task.key, Task.kind, Task.signature)) if db.intact(sig)}


def merge(src: Database, dst: Database) -> tuple[dict[str, int], int]:
    """Database to database, through the same validation as a file: (what was added, winners ignored for want of a
    measured trial)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "merge.jsonl"
        write_export(export_records(src), path)
        plan = read_import(path, known_tasks(dst))
        return apply_import(dst, plan), plan.unbacked


def unbacked_note(n: int) -> str | None:
    """The line a command prints for winners it did not apply."""
    if not n:
        return None
    return (f"ignored {n} winner(s) with no measured trial of theirs in the file: a claim alone never changes what a "
            "compile forces")
