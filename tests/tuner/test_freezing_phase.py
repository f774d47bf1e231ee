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
from tuner.sweep.phases.freezing import UNFROZEN
from tuner.sweep.progress import Progress


def _sweep(db_url, deadline_in_s=None, capture_s=0.0):
    db = Database.open(db_url)
    tuning = _context(db_url, db, trials=4)
    if deadline_in_s is not None:
        tuning = dataclasses.replace(
            tuning, deadline=time.monotonic() + deadline_in_s, settle_by=time.monotonic() + deadline_in_s
        )
    workload = Workload(db, "m/infer/cpu/fp32/1x8")
    task = TaskSpec(
        "f" * 64, Kind("freezing"), "m forward graph 0 freezing", {"space": {}}, space_for("freezing", {"space": {}})
    )
    workload.register([task])
    return SweepContext(
        tuning,
        worker=None,
        progress=Progress(),
        workload=workload,
        device_type="cpu",
        model="m",
        capture_s=capture_s,
        freed_s=5.0,
    )


def test_unfrozen_with_no_time_to_capture_again_stops_the_searches_and_keeps_the_answer(db_url):
    sweep = _sweep(db_url, deadline_in_s=30.0, capture_s=60.0)
    phase = FreezingPhase()
    assert phase.plan(sweep)
    ((t, r),) = phase.pairs
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
    ((t, r),) = phase.pairs
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


class _Worker:
    """The sweep's worker as the phase sees it: what its capture measured of compiled instances, and each job's
    measurement in turn (the worker's real runs are in ``test_sweep_cpu``)."""

    def __init__(self, instance_spread_ms, *measurements):
        self.instance_spread_ms, self.measurements, self.jobs = instance_spread_ms, list(measurements), []

    def run(self, job):
        self.jobs.append(job)
        return self.measurements.pop(0)


def _timed(median_ms, spread_ms):
    return Measurement(Status.OK, median_ms, median_ms, spread_ms, 1.0, baseline_spread_ms=spread_ms)


def test_an_unfrozen_gain_inside_the_noise_is_timed_again_on_fresh_instances_and_that_decides(db_url):
    from tuner.sweep.phases.freezing import again_s, undecided

    noisy, clear = _timed(0.88, 0.2), _timed(0.9, 0.02)
    assert undecided(noisy, 0.02) and not undecided(clear, 0.02) and not undecided(_timed(0.99, 0.2), 0.02)
    assert again_s(10.0, 8.0, 2) == 20.0 and again_s(10.0, 8.0, 1) == 2.0 and again_s(9.0, 8.0, 1) == 2.0
    sweep = _sweep(db_url, deadline_in_s=600.0)
    sweep.worker = _Worker(0.05, noisy, clear)
    phase = FreezingPhase()
    phase.plan(sweep)
    m = phase._measure(sweep, time.monotonic() + 600.0)
    assert phase._store(sweep, phase._again(sweep, m))
    first, second = sweep.worker.jobs
    assert (first.instances, second.instances) == (1, 2)  # the CPU: fresh instances of both sides
    assert second.candidate == first.candidate and second.baseline == first.baseline
    ((t, r),) = phase.pairs
    assert sweep.db.winner_config(r.id, sweep.tuning.device_id) == unfrozen() and sweep.unfrozen_ratio == 0.9
    sweep.db.close()


def test_a_clear_first_timing_or_no_time_left_is_not_timed_again(db_url):
    for first, left_s in ((_timed(0.9, 0.02), 600.0), (_timed(0.88, 0.2), 0.5)):
        sweep = _sweep(db_url, deadline_in_s=left_s)
        sweep.worker = _Worker(None, first)
        sweep.tuning.costs.observe(UNFROZEN, 10.0)  # a second timing of held compiles: ~2 s
        phase = FreezingPhase()
        phase.plan(sweep)
        m = phase._again(sweep, first)
        assert m is first and sweep.worker.jobs == []
        sweep.db.close()
