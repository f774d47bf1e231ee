"""The shipped prior: measurements tuner comes with, so a sweep from an empty database still ranks its candidates.

A prior is a tuner export file (``tuner db export``) in ``tuner/ranking/priors/``, read as any imported file is:
parsed and validated completely (``tuner.db.transfer.read_import``: every config against its task's space, no
pickle), never written into the user's database. What it gives a sweep on the same device model (same device name
and kind), next to that database's own rows:

- the timed trials the learned ranking trains on (``Rankers``), and
- the verified winners that seed a new study after the database's own near winners (``tuner.study.seeds``).

The shipped files, and which workloads they hold, are listed by ``describe()`` and in ``priors/README.md``.
Turned off with ``TUNER_PRIOR=0`` (``tuner sweep --no-prior``).
"""

from __future__ import annotations

import functools
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger("tuner.ranking")

PRIOR_DIR = Path(__file__).with_name("priors")
TIMED = ("ok", "pruned")


@dataclass(frozen=True)
class PriorRows:
    """One device model's rows from every shipped prior file."""

    trials: tuple[
        tuple[str, str, dict[str, Any], dict[str, Any], float], ...
    ] = ()  # (kind, key, signature, config, ratio)
    winners: tuple[
        tuple[str, str, dict[str, Any], dict[str, Any], float | None], ...
    ] = ()  # (kind, key, sig, config, speedup)
    files: tuple[str, ...] = field(default=())
    devices: tuple[str, ...] = field(default=())  # the device models they were measured on

    def timed(self, kinds: tuple[str, ...]) -> list[tuple[str, dict[str, Any], dict[str, Any], float]]:
        """(task key, signature, config, ratio) of the timed trials of ``kinds``, as ``Database.timed_trials``."""
        wanted = {str(k) for k in kinds}
        return [(key, sig, config, ratio) for kind, key, sig, config, ratio in self.trials if kind in wanted]

    def winners_of_kind(self, kind: str, exclude_key: str) -> list[tuple[dict[str, Any], dict[str, Any], float | None]]:
        """(signature, config, speedup) of the winners of ``kind``, as ``Database.winners_of_kind``."""
        return [
            (sig, config, speedup)
            for k, key, sig, config, speedup in self.winners
            if k == str(kind) and key != exclude_key
        ]


def prior_files(directory: Path = PRIOR_DIR) -> list[Path]:
    return sorted(p for p in directory.glob("*.jsonl*") if p.is_file())


@functools.lru_cache(maxsize=8)
def rows_for(
    device_kind: str, device_name: str, capability: str | None = None, directory: Path = PRIOR_DIR
) -> PriorRows:
    """The prior's rows measured on this device model; where none was, those measured on devices of the same kind and
    compute ``capability`` (one architecture: its configs rank alike, and each candidate is measured here before it can
    win); empty when there are none, or when priors are off."""
    from tuner.settings import settings

    if not settings().prior:
        return PriorRows()
    same_model = _rows(directory, lambda d: d["kind"] == device_kind and d["name"] == device_name)
    if same_model.files or not capability:
        return same_model
    return _rows(
        directory, lambda d: d["kind"] == device_kind and str((d.get("info") or {}).get("capability")) == capability
    )


def _rows(directory: Path, here: Callable[[dict[str, Any]], bool]) -> PriorRows:
    trials: list[Any] = []
    winners: list[Any] = []
    files: list[str] = []
    devices: set[str] = set()
    for path in prior_files(directory):
        got = _read(path, here)
        if got is not None and (got[0] or got[1]):
            trials += got[0]
            winners += got[1]
            files.append(path.name)
            devices |= got[2]
    return PriorRows(tuple(trials), tuple(winners), tuple(files), tuple(sorted(devices)))


@functools.lru_cache(maxsize=16)
def _plan(path: Path) -> tuple[Any, str | None]:
    """(the validated import plan of ``path``, None) or (None, why it cannot be read): a damaged prior costs its
    rows, never the sweep. Read once a process (the shipped files do not change under it)."""
    from tuner.db.transfer import ImportRefused, read_import

    try:
        return read_import(path), None
    except (ImportRefused, OSError) as e:
        return None, str(e)


def _read(path: Path, device: Callable[[dict[str, Any]], bool]) -> tuple[list[Any], list[Any], set[str]] | None:
    """(timed trials, winners, device names) of the devices in ``path`` that ``device`` accepts."""
    plan, error = _plan(path)
    if plan is None:
        log.warning("ranking prior %s skipped: %s", path.name, error)
        return None
    here = {fp for fp, d in plan.devices.items() if device(d)}
    tasks = plan.tasks
    trials = [
        (
            tasks[t["task"]]["kind"],
            t["task"],
            tasks[t["task"]]["signature"],
            t["config"],
            t["median_ms"] / t["baseline_ms"],
        )
        for t in plan.trials
        if t["device"] in here and t["status"] in TIMED and t["task"] in tasks and t["median_ms"] and t["baseline_ms"]
    ]
    winners = [
        (
            tasks[w["task"]]["kind"],
            w["task"],
            tasks[w["task"]]["signature"],
            w["config"],
            (w["baseline_ms"] / w["median_ms"]) if w["median_ms"] and w["baseline_ms"] else None,
        )
        for w in plan.winners
        if w["device"] in here and w["task"] in tasks
    ]
    return trials, winners, {plan.devices[fp]["name"] for fp in here}


def read_ahead(device_kind: str, ranking: bool = True, directory: Path = PRIOR_DIR) -> threading.Thread:
    """Read and validate the shipped prior files (cached: :func:`rows_for` then only filters them), and, for a sweep
    that ranks (``ranking``), load the ranking model's library where a file holds a device of ``device_kind``, in a
    thread of its own. A sweep starts it before its capture, whose wait it fills: after the capture, on the H200, the
    two took ~2 s of the sweep's time."""
    from tuner.settings import settings

    def read() -> None:
        try:
            plans = [_plan(path)[0] for path in prior_files(directory)] if settings().prior else []
            if ranking and any(
                d["kind"] == device_kind for plan in plans if plan is not None for d in plan.devices.values()
            ):
                from tuner.ranking.model import Ranker

                Ranker.load_library()
        except Exception:  # noqa: BLE001 - read again, and any error said, when the sweep asks for the rows
            log.debug("reading the priors ahead failed", exc_info=True)

    thread = threading.Thread(target=read, name="tuner-prior-read-ahead", daemon=True)
    thread.start()
    return thread


def describe(directory: Path = PRIOR_DIR) -> list[dict[str, Any]]:
    """What each shipped prior file holds: its devices, workloads and counts (what ``priors/README.md`` lists)."""
    out = []
    for path in prior_files(directory):
        plan, error = _plan(path)
        if plan is None:
            out.append({"file": path.name, "error": error})
            continue
        out.append(
            {
                "file": path.name,
                "devices": sorted({d["name"] for d in plan.devices.values()}),
                "workloads": sorted({w["workload"] for w in plan.workloads}),
                "trials": len(plan.trials),
                "winners": len(plan.winners),
            }
        )
    return out
