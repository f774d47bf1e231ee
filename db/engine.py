"""Turning a URL into a checked engine. No engine is created at import time."""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy import create_engine, event, inspect
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from tuner.db import migrate
from tuner.errors import SchemaError, StorageError

log = logging.getLogger("tuner.db")


def sqlite_path(url: str) -> Path | None:
    u = make_url(url)
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    return Path(u.database)


def make_engine(url: str, *, create_dirs: bool = True) -> Engine:
    try:
        u = make_url(url)
    except ArgumentError as e:
        raise StorageError(f"not a database URL: {url!r}") from e
    path = sqlite_path(url)
    if path is not None and create_dirs:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StorageError(f"cannot create the folder for {path}: {e.strerror}") from e
    try:
        if u.get_backend_name() == "sqlite":
            engine = create_engine(u, connect_args={"timeout": 60})
            event.listen(engine, "connect", _sqlite_pragmas)
        else:
            engine = create_engine(u, pool_pre_ping=True)
    except (SQLAlchemyError, ImportError) as e:
        raise StorageError(f"cannot use database {_safe(url)}: {e}") from e
    return engine


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=60000")
    cur.close()


def _safe(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def check_schema(engine: Engine, url: str, *, create: bool) -> None:
    """Create a new database, or refuse one at another revision with the exact fix."""
    try:
        current = migrate.current_revision(engine)
        head = migrate.head_revision()
        if current == head:
            return
        if current is None:
            tables = [t for t in inspect(engine).get_table_names() if t.startswith("tuner_")]
            if tables:
                raise SchemaError(f"database {_safe(url)} has tuner tables but no schema revision; it was not made by tuner")
            if not create:
                raise SchemaError(f"database {_safe(url)} holds no tuning data yet")
            migrate.upgrade(engine)
            log.info("created tuning database %s at revision %s", _safe(url), head)
            return
        if current in migrate.known_revisions():
            raise SchemaError(
                f"database {_safe(url)} is at schema revision {current}, this tuner needs {head}: "
                f"run `tuner db upgrade --db {_safe(url)}`"
            )
        raise SchemaError(
            f"database {_safe(url)} is at schema revision {current}, written by a newer tuner; upgrade tuner to use it"
        )
    except SQLAlchemyError as e:
        raise StorageError(f"cannot open database {_safe(url)}: {_first_line(e)}") from e


def _first_line(e: BaseException) -> str:
    text = str(getattr(e, "orig", None) or e).strip()
    return text.splitlines()[0] if text else type(e).__name__
