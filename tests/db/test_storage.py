"""The storage contract (``tuner.db.storage.Storage``), run on every implementation: a SQLite database, a PostgreSQL
database, and the ordered union of two (local first, then shared). Then what only the union does."""

import pytest

from tuner.db import Database, DeviceInfo, EnvironmentInfo
from tuner.db.storage import OrderedUnion
from tuner.errors import StorageError

DEV = DeviceInfo("cpu", "Test CPU", {"cores": 2, "threads": 2, "isa": "AVX2"})
ENV = EnvironmentInfo("2.14.1", "3.8.0", None, "3.11.7", "0.1.0")
SIG = {"space": {"choices": ["a", "b", "c"], "default": "a"}}


def _winner(db: Database, key: str, choice: str) -> None:
    d, e = db.device_id(DEV), db.environment_id(ENV)
    t = db.upsert_task(key, "template_choice", f"mm {key[:4]}", SIG, "fp")
    trial = db.record_trial(
        t.id, d, e, {"choice": choice}, "ok", median_ms=1.0, min_ms=1.0, spread_ms=0.0, baseline_ms=2.0
    )
    db.set_winner(t.id, d, trial.id, {"choice": choice}, 1.0, 2.0)


@pytest.fixture(params=["sqlite", "postgres", "union"])
def store_with_two_winners(request, tmp_path):
    """(a store holding winners "b" for key k1 and "c" for key k2, its expected counts)."""
    if request.param == "union":
        local, shared = (
            Database.open(f"sqlite:///{tmp_path / 'local.db'}"),
            Database.open(f"sqlite:///{tmp_path / 'shared.db'}"),
        )
        _winner(local, "1" * 64, "b")
        _winner(shared, "2" * 64, "c")
        store = OrderedUnion([local, shared])
    else:
        url = f"sqlite:///{tmp_path / 'one.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
        store = Database.open(url)
        _winner(store, "1" * 64, "b")
        _winner(store, "2" * 64, "c")
    yield store
    store.close()


def test_a_store_answers_its_winners_for_one_device(store_with_two_winners):
    w = store_with_two_winners.winners_for_device(DEV.fingerprint)
    assert {k: v[1] for k, v in w.items()} == {"1" * 64: {"choice": "b"}, "2" * 64: {"choice": "c"}}
    assert all(kind == "template_choice" and sig == SIG for kind, _, sig in w.values())
    assert store_with_two_winners.winners_for_device("another device") == {}


def test_a_store_counts_what_it_holds(store_with_two_winners):
    assert store_with_two_winners.count() == {"tasks": 2, "trials": 2, "winners": 2}


def test_the_first_store_that_has_a_winner_answers_it(tmp_path):
    local, shared = Database.open(f"sqlite:///{tmp_path / 'l.db'}"), Database.open(f"sqlite:///{tmp_path / 's.db'}")
    _winner(local, "1" * 64, "b")
    _winner(shared, "1" * 64, "c")
    _winner(shared, "3" * 64, "c")
    w = OrderedUnion([local, shared]).winners_for_device(DEV.fingerprint)
    assert {k: v[1]["choice"] for k, v in w.items()} == {"1" * 64: "b", "3" * 64: "c"}
    w = OrderedUnion([shared, local]).winners_for_device(DEV.fingerprint)
    assert w["1" * 64][1] == {"choice": "c"}


def test_a_failing_store_is_reported_and_skipped(tmp_path):
    good, broken = Database.open(f"sqlite:///{tmp_path / 'g.db'}"), Database.open(f"sqlite:///{tmp_path / 'b.db'}")
    _winner(good, "1" * 64, "b")
    (tmp_path / "b.db").unlink()  # gone under the open engine: every query fails
    broken.engine.dispose()
    (tmp_path / "b.db").mkdir()  # and cannot be recreated
    errors = []
    w = OrderedUnion([broken, good], on_error=errors.append).winners_for_device(DEV.fingerprint)
    assert list(w) == ["1" * 64] and len(errors) == 1 and isinstance(errors[0], StorageError)
    with pytest.raises(StorageError):
        OrderedUnion([broken, good]).winners_for_device(DEV.fingerprint)
