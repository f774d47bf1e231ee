"""Concurrent first use: several processes opening one empty database at the same moment all get it, created once
(SQLite and a real PostgreSQL server)."""

import multiprocessing as mp
import time

import pytest

PROCESSES, ROUNDS = 4, 3


def _open_at(url: str, start: float, out) -> None:
    from tuner.db import Database

    time.sleep(max(0.0, start - time.time()))
    try:
        Database.open(url).close()
        out.put("ok")
    except Exception as e:  # noqa: BLE001 - what failed is the test's answer
        out.put(f"{type(e).__name__}: {e}")


def _race(url: str) -> list[str]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    start = time.time() + 4.0  # every process imported and waiting: they open together
    procs = [ctx.Process(target=_open_at, args=(url, start, out)) for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    got = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    return got


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_processes_opening_an_empty_database_together_all_succeed(kind, tmp_path, request):
    failures = []
    for r in range(ROUNDS):
        if kind == "sqlite":
            url = f"sqlite:///{tmp_path / f'race{r}.db'}"
        else:
            url = request.getfixturevalue("pg_url") if r == 0 else _fresh_pg(request, r)
        failures += [g for g in _race(url) if g != "ok"]
    assert failures == []


def _fresh_pg(request, r: int) -> str:
    """Another empty database on the same server (pg_url gives one per test)."""
    import os
    import uuid

    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    admin = os.environ["TUNER_TEST_PG_URL"]
    name = f"tuner_race_{uuid.uuid4().hex[:10]}"
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with engine.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()

    request.addfinalizer(drop)
    return make_url(admin).set(database=name).render_as_string(hide_password=False)


def test_a_new_sqlite_database_is_made_under_the_lock_beside_it_and_an_existing_one_opens_without_it(tmp_path):
    """The lock is a file beside the database: the database's own file never gets a descriptor that, closed, would
    drop SQLite's locks. A process holding it (here a thread, on its own descriptor) keeps a new database waiting;
    a made one opens at once."""
    import fcntl
    import os
    import threading

    from tuner.db import Database

    made, new = tmp_path / "made.db", tmp_path / "new.db"
    Database.open(f"sqlite:///{made}").close()
    fd = os.open(f"{new}.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    done = threading.Event()
    opener = threading.Thread(target=lambda: (Database.open(f"sqlite:///{new}").close(), done.set()))
    try:
        opener.start()
        t0 = time.monotonic()
        Database.open(f"sqlite:///{made}").close()
        assert time.monotonic() - t0 < 5 and not done.wait(1.5)  # the new one waits for the lock
    finally:
        os.close(fd)
    opener.join(30)
    assert done.is_set()
