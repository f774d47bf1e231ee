"""The stored answers a compile under ``backend="tuned"`` forces, read once per database state.

Each database is opened once per process (read-only) and kept. Every compile asks it for a cheap revision marker
(:meth:`Database.revision`, two aggregate queries); only when the marker, the SQLite file or the process changed are
the winners read again, validated against their spaces and turned into a :class:`Forcing` and a :class:`Nearest`. So a
workload of N Dynamo graphs reads the store once, and a winner written between two compiles is seen by the second.
Each full read counts as ``store_reads`` (``counters.count``).
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any

from tuner import once
from tuner.backend import counters
from tuner.core import Forcing, Winners
from tuner.search_spaces import valid_winners
from tuner.db.storage import first_answers
from tuner.errors import StorageError
from tuner.nearest import Nearest

log = logging.getLogger("tuner.backend")
_lock = threading.Lock()


def warn_once(msg: str) -> None:
    """One warning of the read path, once per process (``tuner.once``)."""
    once.warn_once(log, msg)


@dataclass
class _Store:
    """One database opened by this process, and what was last read from it, per device model."""

    db: Any
    identity: tuple[Any, ...]
    revision: tuple[Any, ...] | None = None
    winners: dict[str, Winners] = field(default_factory=dict)


_stores: dict[str, _Store] = {}


def _identity(url: str) -> tuple[Any, ...] | None:
    """What makes an open database stale besides its contents: another process (a forked worker must not share the
    parent's connections), or another SQLite file at the same path. None: the SQLite file does not exist."""
    from tuner.db.engine import sqlite_path

    path = sqlite_path(url)
    if path is None:
        return (os.getpid(),)
    try:
        st = path.stat()
    except OSError:
        return None
    return (os.getpid(), st.st_dev, st.st_ino)


def store(url: str) -> Any:
    """The database at ``url``, opened read-only once per process, or None (with one warning) when it is missing or
    unusable."""
    from tuner.db import Database
    from tuner.db.engine import sqlite_path

    identity = _identity(url)
    if identity is None:
        warn_once(
            f"no tuning database at {sqlite_path(url)}; compiling with Inductor's defaults (run `tuner sweep` first)"
        )
        return None
    with _lock:
        kept = _stores.get(url)
        if kept is not None and kept.identity == identity:
            return kept.db
        try:
            db = Database.open(url, create=False, read_only=True)
        except StorageError as e:
            warn_once(f"{e}; compiling with Inductor's defaults")
            return None
        if kept is not None and kept.identity[0] == os.getpid():
            kept.db.close()
        _stores[url] = _Store(db, identity)
        return db


def winners(url: str, device_fingerprint: str) -> Winners | None:
    """Every valid winner stored at ``url`` for this device model; read again only when the database changed.
    None (with one warning) when the database cannot be read."""
    db = store(url)
    if db is None:
        return None
    kept = _stores[url]
    try:
        revision = db.revision()
        if revision != kept.revision:
            kept.revision, kept.winners = revision, {}
        if device_fingerprint not in kept.winners:
            counters.bump("store_reads")
            kept.winners[device_fingerprint] = valid_winners(db.winners_for_device(device_fingerprint))
    except StorageError as e:
        forget(url)
        warn_once(f"{e}; compiling with Inductor's defaults")
        return None
    return kept.winners[device_fingerprint]


def load_answers(urls: list[str], device_type: str, device_index: int = 0) -> tuple[Forcing, Nearest]:
    """The winners stored for this device model in the ordered union of ``urls`` (the first database that has a
    task's winner answers it), as exact answers and as answers for other sizes."""
    from tuner.db import current_device

    fingerprint = current_device(device_type, device_index).fingerprint
    merged = first_answers(winners(url, fingerprint) or {} for url in urls)
    return Forcing.from_winners(merged), Nearest.from_winners(merged)


def stores(urls: list[str]) -> list[Any]:
    """The databases of ``urls`` that open (kept open: the caller does not close them)."""
    return [db for db in map(store, urls) if db is not None]


def forget(url: str | None = None) -> None:
    """Close and drop the kept database at ``url`` (every one when None)."""
    with _lock:
        for u in [url] if url is not None else list(_stores):
            kept = _stores.pop(u, None)
            if kept is not None and kept.identity[0] == os.getpid():
                kept.db.close()


__all__ = ["forget", "load_answers", "store", "stores", "warn_once", "winners"]
