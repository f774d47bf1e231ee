"""The whole-workload check times what a user's compile would transfer: a task with no winner takes the nearest stored
size's answer in ``backend="tuned"`` (``tuner.nearest``), so the check forces those answers with the winners, and one
the workload is slower with gets Inductor's default stored, an exact answer no transfer overrides. The workload's
timings stand in for the worker's GPU compiles (those run in tests/gpu); the database is real."""

import contextlib
import dataclasses

from tuner.core import Forcing, Kind
from tuner.db import Database
from tuner.measure.result import CaptureResult, Measurement, Status
from tuner.sweep.phases import SweepContext, WholeCheckPhase, Workload
from tuner.sweep.phases.whole import TRANSFERRED, base_and_parts
from tuner.sweep.progress import Progress
from tuner.sweep.tasks import tasks_from_capture


class Notes(Progress):
    def __init__(self):
        self.notes = []

    def note(self, text):
        self.notes.append(" ".join(text.split()))


def _site(key, n, transposed=False):
    row = ["cuda", "bf16", n, n, *((1, n) if transposed else (n, 1)), 0]  # device, dtype, sizes, strides, offset
    return {
        "key": key,
        "op": "mm",
        "inputs": [row, row],
        "choices": ["aten::mm", "triton::mm a"],
        "default": "aten::mm",
        "count": 1,
    }


def _sweep(db_url, db, *sites):
    from tests.helpers.replay import _context

    workload = Workload(db, "replay")
    records = workload.register(tasks_from_capture(CaptureResult([], list(sites), {}, {"info": {}}, {}, 1.0), "m"))
    tuning = dataclasses.replace(_context(db_url, db, trials=4), deadline=None, settle_by=None)
    return SweepContext(
        tuning, worker=None, progress=Notes(), workload=workload, device_type="cuda", model="m"
    ), records


def test_a_task_with_no_winner_is_checked_with_the_answer_a_compile_would_transfer(db_url):
    db = Database.open(db_url)
    sweep, (small, large, other) = _sweep(
        db_url, db, _site("s64", 64), _site("s128", 128), _site("t128", 128, transposed=True)
    )
    db.set_winner(small.id, sweep.tuning.device_id, None, {"choice": "triton::mm a"}, 0.5, 1.0)
    base, parts = base_and_parts(sweep)
    large_task = next(t for t, r in sweep.workload.pairs() if r.id == large.id)
    assert parts["template-site"].keys() == {small.id}
    # the same op and layout at other sizes takes the winner; a transposed operand is another layout and takes none
    assert parts[TRANSFERRED] == {large.id: large_task.forcing({"choice": "triton::mm a"})}
    db.set_winner(
        large.id, sweep.tuning.device_id, None, {"choice": "aten::mm"}, 1.0, 1.0
    )  # its own answer, the default
    assert base_and_parts(sweep)[1][TRANSFERRED] == {}, "an exact answer, even the default, is never overridden"
    db.close()


class _Timed:
    """The worker's whole-workload timings: 1.0 ms with Inductor's defaults, 0.9 with the small site's winner, and
    0.2 ms slower with the transferred answer at the large site."""

    alive = True

    def __init__(self, small: str, large: str):
        self.small, self.large, self.candidates = small, large, []

    @contextlib.contextmanager
    def held(self):
        yield

    def run(self, job):
        sites = (job.candidate.get(str(Kind.SITE)) or {}) if isinstance(job.candidate, dict) else {}
        self.candidates.append(sorted(sites))
        ms = 1.0 - 0.1 * (self.small in sites) + 0.2 * (self.large in sites)
        return Measurement(Status.OK, ms, ms, 0.001, 1.0, compile_s=0.0, baseline_spread_ms=0.001)


def test_a_transferred_answer_the_workload_is_slower_with_gets_the_default_stored(db_url):
    db = Database.open(db_url)
    sweep, (small, large) = _sweep(db_url, db, _site("s64", 64), _site("s128", 128))
    db.set_winner(small.id, sweep.tuning.device_id, None, {"choice": "triton::mm a"}, 0.5, 1.0)
    sweep.worker = _Timed("s64", "s128")
    WholeCheckPhase().run(sweep, None)
    assert sweep.worker.candidates[0] == ["s128", "s64"], (
        "the first measurement forces the transferred answer with the winners"
    )
    assert db.winner_config(large.id, sweep.tuning.device_id) == {"choice": "aten::mm"}
    assert db.winner_config(small.id, sweep.tuning.device_id) == {"choice": "triton::mm a"}
    notes = sweep.progress.notes
    assert any(
        n.startswith("1 task(s) with no winner would take the answer of the nearest stored sizes") for n in notes
    ), notes
    assert any(
        n.startswith("1 answer(s) transferred from other sizes were replaced by Inductor's defaults") for n in notes
    ), notes
    assert base_and_parts(sweep)[1][TRANSFERRED] == {}
    db.close()


def test_no_stored_winner_means_nothing_to_transfer(db_url):
    db = Database.open(db_url)
    sweep, _ = _sweep(db_url, db, _site("s64", 64), _site("s128", 128))
    assert base_and_parts(sweep)[1][TRANSFERRED] == {} and base_and_parts(sweep)[0] == Forcing()
    db.close()
