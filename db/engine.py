"""Turning a URL into a checked engine. No engine is created at import time."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from tuner.db import migrate
from tuner.errors import SchemaError, StorageError

log = logging.getLogger("tuner.db")


def sqlite_path(url: str) -> Path | None:
    try:
        u = make_url(url)
    except (ArgumentError, ValueError):
        return None  # not a URL at all: make_engine says so
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    return Path(u.database)


def make_engine(url: str, *, create_dirs: bool = True, read_only: bool = False) -> Engine:
    """An engine for ``url``. ``read_only``: nothing it does can create or change the database (a SQLite file opened
    with ``mode=ro``, which must exist; PostgreSQL transactions read-only)."""
    try:
        u = make_url(url)
        u.port  # noqa: B018 - a port that is no number fails here, not at the first query
    except ArgumentError as e:
        raise StorageError(f"not a database URL: {_safe(url)!r}") from e
    except ValueError:
        raise StorageError(f"database URL {_safe(url)} has a port that is not a number") from None
    path = sqlite_path(url)
    if path is not None and read_only and not path.is_file():
        raise StorageError(f"no tuning database at {path}")
    if path is not None and create_dirs and not read_only:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StorageError(f"cannot create the folder for {path}: {e.strerror}") from e
    try:
        if u.get_backend_name() == "sqlite":
            if path is not None and read_only:
                u = u.set(database=f"file:{path}", query={**u.query, "mode": "ro", "uri": "true"})
            engine = create_engine(u, connect_args={"timeout": 60})
            event.listen(engine, "connect", _sqlite_pragmas if not read_only else _sqlite_read_pragmas)
        else:
            args = (
                {"options": "-c default_transaction_read_only=on"}
                if read_only and u.get_backend_name() == "postgresql"
                else {}
            )
            engine = create_engine(u, pool_pre_ping=True, connect_args=args)
    except (SQLAlchemyError, ImportError) as e:
        raise StorageError(f"cannot use database {_safe(url)}: {e}") from e
    return engine


def _sqlite_read_pragmas(dbapi_conn, _record) -> None:
    """A read-only connection's: waits for writers, and changes nothing (WAL is a writer's setting)."""
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=60000")
    cur.close()


def _sqlite_pragmas(dbapi_conn, record) -> None:
    _sqlite_read_pragmas(dbapi_conn, record)
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _safe(url: str) -> str:
    """``url`` with its password masked, also when it cannot be parsed."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


SCHEMA_LOCK = 0x7475_6E65_7273_6368  # "tunersch": the PostgreSQL advisory lock around schema creation and upgrades


@contextlib.contextmanager
def schema_lock(engine: Engine, url: str) -> Iterator[None]:
    """Serialize schema creation and upgrades between processes: a PostgreSQL advisory lock (the session's, held on
    its own connection), an ``flock`` on a file beside a SQLite database (``<file>.lock``). Two processes opening an
    empty database at once then create it once; the second finds it made. Not on the database file itself: closing
    any descriptor of that file drops every POSIX lock this process holds on it, SQLite's own included."""
    if engine.dialect.name == "postgresql":
        try:
            conn = engine.connect()
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": SCHEMA_LOCK})
        except SQLAlchemyError as e:
            raise StorageError(f"cannot open database {_safe(url)}: {_first_line(e)}") from None
        try:
            yield
        finally:
            with contextlib.suppress(SQLAlchemyError):
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": SCHEMA_LOCK})
                conn.commit()
            conn.close()
        return
    path = sqlite_path(url)
    if path is None:
        yield
        return
    try:
        fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise StorageError(f"cannot open {path}.lock: {e.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _new_sqlite(url: str) -> bool:
    """A SQLite database not made yet (no file, or an empty one)."""
    path = sqlite_path(url)
    return path is not None and (not path.exists() or path.stat().st_size == 0)


def check_schema(engine: Engine, url: str, *, create: bool) -> None:
    """Create a new database, or refuse one at another revision with the exact fix. A new SQLite database is checked
    and created entirely under the schema lock: its first connection turns on WAL, a write that SQLite refuses at once
    ("database is locked", whatever the busy timeout) while another process's first connection does the same."""
    first = create and _new_sqlite(url)
    with schema_lock(engine, url) if first else contextlib.nullcontext():
        _check(engine, url, create=create, locked=first)


def _check(engine: Engine, url: str, *, create: bool, locked: bool) -> None:
    try:
        current = migrate.current_revision(engine)
        head = migrate.head_revision()
        if current == head:
            return
        if current is None and create:
            with contextlib.nullcontext() if locked else schema_lock(engine, url):
                _create(engine, url, head)
            return
        if current is None:
            _refuse_foreign(engine, url)
            raise SchemaError(f"database {_safe(url)} holds no tuning data yet")
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


def _create(engine: Engine, url: str, head: str) -> None:
    """Inside the schema lock: create the schema, unless the process that held the lock before made it."""
    current = migrate.current_revision(engine)
    if current is not None:
        if current != head:
            check_schema(engine, url, create=False)  # another revision: the same refusal as anywhere
        return
    _refuse_foreign(engine, url)
    migrate.upgrade(engine)
    log.info("created tuning database %s at revision %s", _safe(url), head)


def _refuse_foreign(engine: Engine, url: str) -> None:
    """A database with tuner's tables but no schema revision was not made by tuner: never create over it."""
    if [t for t in inspect(engine).get_table_names() if t.startswith("tuner_")]:
        raise SchemaError(f"database {_safe(url)} has tuner tables but no schema revision; it was not made by tuner")


def _first_line(e: BaseException) -> str:
    text = str(getattr(e, "orig", None) or e).strip()
    return text.splitlines()[0] if text else type(e).__name__
