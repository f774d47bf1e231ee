"""The freezing phase's bookkeeping, without a worker: what a rerun reads back, and what the sweep does where unfrozen
won but no time is left to capture the workload again (the end-to-end paths run in ``test_sweep_cpu``)."""

import dataclasses
import time

from tests.helpers.replay import _context
from tuner.core import Kind, TaskSpec
from tuner.db import Database
from tuner.measure.result import Measurement, Status
from tuner.search_spaces import space_for
from tuner.search_spaces.freezing import unfrozen
from tuner.sweep.phases import FreezingPhase, SweepContext, Workload
from tuner.sweep.progress import Progress


def _sweep(db_url, deadline_in_s=None, capture_s=0.0):
    db = Database.open(db_url)
    tuning = _context(db_url, db, trials=4)
    if deadline_in_s is not None:
        tuning = dataclasses.replace(tuning, deadline=time.monotonic() + deadline_in_s, settle_by=time.monotonic() + deadline_in_s)
    workload = Workload(db, "m/infer/cpu/fp32/1x8")
    task = TaskSpec("f" * 64, Kind("freezing"), "m forward graph 0 freezing", {"space": {}}, space_for("freezing", {"space": {}}))
    workload.register([task])
    return SweepContext(tuning, worker=None, progress=Progress(), workload=workload, device_type="cpu", model="m",
                        capture_s=capture_s, freed_s=5.0)


def test_unfrozen_with_no_time_to_capture_again_stops_the_searches_and_keeps_the_answer(db_url):
    sweep = _sweep(db_url, deadline_in_s=30.0, capture_s=60.0)
    phase = FreezingPhase()
    assert phase.plan(sweep)
    (t, r), = phase.pairs
    from tuner.sweep.phases.freezing import store

    assert store(sweep, phase.pairs, Measurement(Status.OK, 0.9, 0.9, 0.01, 1.0, baseline_spread_ms=0.01), "frozen")
    sweep.settle_freezing()
    assert sweep.freezing_settled and sweep.freed_s == 0.0
    phase._capture_unfrozen(sweep)  # a capture of 60 s does not fit the 30 left
    assert not phase.switched and sweep.workload.tasks == [] and [f.id for f in sweep.former] == [r.id]
    assert not sweep.time_left() and sweep.recorded == []  # no search tunes the frozen graphs' tasks
    assert sweep.db.winner_config(r.id, sweep.tuning.device_id) == unfrozen()
    assert sweep.unfrozen_ratio == 0.9 and sweep.outcomes[r.id].winner == unfrozen()
    sweep.db.close()


def test_a_rerun_reads_what_an_earlier_sweep_settled(db_url):
    sweep = _sweep(db_url)
    phase = FreezingPhase()
    phase.plan(sweep)
    assert phase._stored(sweep) is None  # never timed: it is measured
    slower = Measurement(Status.OK, 1.2, 1.2, 0.01, 1.0, baseline_spread_ms=0.01)
    from tuner.sweep.phases.freezing import store

    assert not store(sweep, phase.pairs, slower, "frozen")
    assert phase._stored(sweep) is False  # timed, frozen stays: not timed again
    (t, r), = phase.pairs
    assert sweep.db.winner_config(r.id, sweep.tuning.device_id) == t.space.default
    sweep.db.set_winner(r.id, sweep.tuning.device_id, None, unfrozen(), None, None)
    assert phase._stored(sweep) is True  # unfrozen won before: captured again without measuring
    sweep.db.close()


def test_settling_freezing_gives_the_phases_the_time_the_end_kept_for_it(db_url):
    sweep = _sweep(db_url, deadline_in_s=30.0)
    before = sweep.tuning.deadline
    sweep.settle_freezing()
    assert sweep.tuning.deadline == before + 5.0 and sweep.freezing_settled
    sweep.settle_freezing()
    assert sweep.tuning.deadline == before + 5.0  # once
    sweep.db.close()
