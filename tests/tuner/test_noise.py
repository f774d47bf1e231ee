"""Noise-aware decisions: a gain inside the measured spread of both sides is not a win, whatever min_gain says."""

import pytest

from tests.helpers.replay import _context, tasks
from tuner.db import Database
from tuner.measure import Measurement, Status
from tuner.study.context import record
from tuner.study.settle import choose_winner


def _m(median, spread, base_spread, base=1.0):
    return Measurement(Status.OK, median, median, spread, base, baseline_spread_ms=base_spread)


@pytest.mark.parametrize(
    "m, wins",
    [
        (_m(0.90, 0.01, 0.01), True),  # 10% faster, boxes far apart
        (_m(0.90, 0.15, 0.10), False),  # 10% faster on medians, but 0.1 ms <= (0.15 + 0.10) / 2: noise
        (_m(0.90, 0.05, None), True),  # only the candidate's spread known: 0.1 > 0.025
        (_m(0.99, 0.0, 0.0), False),  # below min_gain (2%)
        (
            Measurement(Status.OK, 0.9, 0.9, None, 1.0),
            True,
        ),  # no spreads (a site batch's single timing): min_gain alone
    ],
)
def test_a_gain_must_clear_min_gain_and_the_measured_noise(m, wins):
    assert m.beats_default(0.02) is wins


def test_a_noisy_pair_is_not_declared_a_winner_and_a_clean_one_is(db_url):
    db = Database.open(db_url)
    tuning = _context(db_url, db, trials=4)
    task = tasks(2)[0]
    for label, verify, expect_default in (("noisy", _m(0.85, 0.4, 0.3), True), ("clean", _m(0.85, 0.02, 0.02), False)):
        rec = db.upsert_task(
            f"{ord(label[0]):064x}", task.kind, f"{label} graph", task.signature, task.space.fingerprint()
        )
        config = {**task.space.default, "cpp.simdlen": 0}
        assert config != task.space.default and task.space.is_valid(config)
        record(tuning, rec, task.space.default, _m(1.0, 0.0, 0.0))
        record(tuning, rec, config, _m(0.8, 0.3, 0.3))  # the search saw a 20% gain
        outcome = choose_winner(tuning, rec, task.space, lambda c, rounds: verify)
        assert outcome.is_default is expect_default, label
        stored = db.winner_config(rec.id, tuning.device_id)
        assert stored == (task.space.default if expect_default else config)
    db.close()
