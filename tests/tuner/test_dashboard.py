"""Optuna Dashboard on a tuning database: studies read through Optuna's own API, as
``optuna-dashboard sqlite:///…`` reads them, have names a person knows and say their default, best and winner."""

import optuna

from tests.helpers.replay import _context, replay_measure, tasks
from tuner.db import Database
from tuner.keys import canonical_json
from tuner.sweep.scheduler import tune_tasks
from tuner.sweep.winners import StoredWinners


def test_studies_are_named_for_their_tasks_and_carry_default_best_and_winner(db_url):
    db = Database.open(db_url)
    specs = tasks(2)[:2]
    records = [db.upsert_task(t.key, t.kind, t.name, t.signature, t.space.fingerprint()) for t in specs]
    outcomes, _ = tune_tasks(_context(db_url, db, 4), specs, records, lambda task, base: replay_measure, StoredWinners({}))
    db.close()

    summaries = {s.study_name: s for s in optuna.get_all_study_summaries(f"{db_url}")}
    assert len(summaries) == 2
    for spec, outcome in zip(specs, sorted(outcomes, key=lambda o: o.task.name)):
        name = next(n for n in summaries if n.startswith(spec.name))
        assert f"[{spec.kind}]" in name and spec.key[:12] in name
        attrs = summaries[name].user_attrs
        assert (
            attrs["task"] == spec.name
            and attrs["default_ms"] == outcome.default_ms
            and attrs["best_ms"] == outcome.best_ms
        )
        assert attrs["winner"] == ("Inductor's default" if outcome.is_default else canonical_json(outcome.winner))
        study = optuna.load_study(study_name=name, storage=db_url)
        assert len(study.trials) >= 4 and study.best_value > 0


def test_a_study_made_under_the_old_name_is_resumed(db_url):
    from tuner.study.names import study_name

    db = Database.open(db_url)
    spec = tasks(1)[0]
    rec = db.upsert_task(spec.key, spec.kind, spec.name, spec.signature, spec.space.fingerprint())
    ctx = _context(db_url, db, 4)
    old = f"tuner:{rec.key}:{ctx.device_fingerprint[:16]}"
    optuna.create_study(study_name=old, storage=ctx.storage)
    assert study_name(ctx, rec) == old
    db.close()
