import shutil
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

from tuner.db import Database, DeviceInfo, EnvironmentInfo, migrate
from tuner.db.engine import make_engine
from tuner.errors import SchemaError, StorageError

DATA = Path(__file__).resolve().parents[1] / "data"
DEV = DeviceInfo("cpu", "Test CPU", {"cores": 2, "threads": 2, "isa": "AVX2"})
ENV = EnvironmentInfo("2.14.1", "3.8.0", None, "3.11.7", "0.1.0")


def _fill(db: Database):
    d, e = db.device_id(DEV), db.environment_id(ENV)
    t = db.upsert_task("k" * 64, "template_choice", "mm 8x8", {"space": {"choices": ["a", "b"], "default": "a"}}, "fp")
    return d, e, t


def test_new_database_is_created_at_head(any_db_url):
    db = Database.open(any_db_url)
    assert migrate.current_revision(db.engine) == migrate.head_revision()
    assert db.stats()["tasks"] == 0
    if db.engine.dialect.name == "sqlite":
        with db.engine.connect() as c:
            assert c.execute(text("PRAGMA journal_mode")).scalar() == "wal"
    assert Database.open(any_db_url, create=False).stats()["trials"] == 0  # reopening checks, creates nothing


def test_identities_are_idempotent(any_db_url):
    db = Database.open(any_db_url)
    assert db.device_id(DEV) == db.device_id(DEV)
    assert db.environment_id(ENV) == db.environment_id(ENV)
    t1 = db.upsert_task("k" * 64, "cpp_graph", "g", {}, "fp")
    t2 = db.upsert_task("k" * 64, "cpp_graph", "other name", {}, "fp")
    assert t1.id == t2.id and t2.name == "g"


def test_trials_winners_and_stats(any_db_url):
    db = Database.open(any_db_url)
    d, e, t = _fill(db)
    ok = db.record_trial(t.id, d, e, {"choice": "b"}, "ok", median_ms=1.0, min_ms=0.9, spread_ms=0.1, baseline_ms=2.0)
    db.record_trial(t.id, d, e, {"choice": "a"}, "compile_error", error="boom")
    assert ok.ratio == 0.5
    assert db.find_trial(t.id, d, {"choice": "b"}).id == ok.id
    assert db.find_trial(t.id, d, {"choice": "zzz"}) is None
    assert db.winner_configs([t.id], d) == {}
    db.set_winner(t.id, d, ok.id, {"choice": "b"}, 1.0, 2.0)
    assert db.winner_configs([t.id, t.id + 1], d) == {t.id: {"choice": "b"}}
    assert db.winners_for_device(DEV.fingerprint)["k" * 64][:2] == ("template_choice", {"choice": "b"})
    assert db.winners_for_device("another-device") == {}
    s = db.stats()
    assert (s["tasks"], s["trials"], s["winners"]) == (1, 2, 1)
    assert s["trials_by_status"] == {"ok": 1, "compile_error": 1}
    assert (
        db.top_winners()[0]["speedup"] == 2.0 and db.top_winners()[0]["spread_ms"] == 0.1
    )  # the winning trial's spread
    assert db.top_winners()[0]["drift_ms"] is None  # one timing of the default: nothing to compare


def test_the_spread_shown_covers_the_defaults_drift_between_trials(any_db_url):
    """The same code (the default) timed as the baseline of several trials: how far it moved between them is the
    spread a re-measurement can land in, when that is wider than the winning trial's own."""
    db = Database.open(any_db_url)
    d, e, t = _fill(db)
    win = db.record_trial(t.id, d, e, {"choice": "b"}, "ok", median_ms=1.0, min_ms=0.9, spread_ms=0.05, baseline_ms=2.0)
    db.record_trial(t.id, d, e, {"choice": "c"}, "ok", median_ms=2.1, min_ms=2.0, spread_ms=0.05, baseline_ms=2.3)
    db.record_trial(t.id, d, e, {"choice": "a"}, "compile_error", error="boom", baseline_ms=9.0)  # not a timing
    db.set_winner(t.id, d, win.id, {"choice": "b"}, 1.0, 2.0)
    row = db.top_winners()[0]
    assert row["iqr_ms"] == 0.05 and abs(row["drift_ms"] - 0.3) < 1e-9 and row["spread_ms"] == row["drift_ms"]
    db.close()


def test_storage_errors_are_one_line(tmp_path):
    with pytest.raises(StorageError, match="not a database URL"):
        Database.open("no url at all")
    with pytest.raises(StorageError, match="cannot use database nonsense"):
        Database.open("nonsense://")
    with pytest.raises(StorageError, match="cannot"):
        Database.open("sqlite:////proc/tuner/x.db")
    with pytest.raises(StorageError):
        Database.open("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2")


def test_older_database_is_refused_then_upgraded_keeping_data(tmp_path):
    path = tmp_path / "old.db"
    shutil.copy(DATA / "schema_0001.db", path)
    url = f"sqlite:///{path}"
    with pytest.raises(SchemaError, match=r"revision 0001.*tuner db upgrade"):
        Database.open(url)
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    db = Database.open(url)
    s = db.stats()
    assert (s["tasks"], s["trials"], s["winners"]) == (1, 1, 1)
    assert list(db.winners_for_device("dev-fp").values())[0][1] == {"choice": "cpp:CppMicroGemmFP32Vec"}
    db.link_workload("m/infer", [1])  # the table 0002 added


def test_newer_database_is_refused(db_url, tmp_path):
    Database.open(db_url).close()
    con = sqlite3.connect(tmp_path / "tuning.db")
    con.execute("UPDATE tuner_alembic_version SET version_num='9999'")
    con.commit()
    con.close()
    with pytest.raises(SchemaError, match="newer tuner"):
        Database.open(db_url)


def test_read_only_open_does_not_create(tmp_path):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    make_engine(url).dispose()
    with pytest.raises(SchemaError, match="no tuning data"):
        Database.open(url, create=False)


def test_a_released_claim_is_taken_again_and_a_finished_one_is_not(any_db_url):
    from tuner.db.claims import claim_next, finish, held_by_others, pending, release, release_all

    db = Database.open(any_db_url)
    d, _, t = _fill(db)
    assert claim_next(db, [t.id], d, "w1", 8, 600) == t.id
    assert claim_next(db, [t.id], d, "w2", 8, 600) is None  # held by w1
    assert held_by_others(db, [t.id], d, "w2") == [t.id] and held_by_others(db, [t.id], d, "w1") == []
    release(db, t.id, d, "w1")  # w1's time budget ran out mid-study
    assert pending(db, [t.id], d, 8) == 1 and held_by_others(db, [t.id], d, "w2") == []
    assert claim_next(db, [t.id], d, "w2", 8, 600) == t.id  # a rerun continues it
    finish(db, t.id, d, "w2", 8)
    assert claim_next(db, [t.id], d, "w3", 8, 600) is None and pending(db, [t.id], d, 8) == 0
    assert held_by_others(db, [t.id], d, "w3") == []  # finished: nobody is tuning it
    assert claim_next(db, [t.id], d, "w3", 12, 600) == t.id  # a bigger target reopens it
    release_all(db, "w3")  # w3 was interrupted (on another host: its claim would otherwise live until it expires)
    assert claim_next(db, [t.id], d, "w4", 12, 600) == t.id
    db.close()
