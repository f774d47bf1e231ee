"""Whether a CUDA workload runs under CUDA graphs, as the sweep decides it (``tuner/sweep/phases/cuda_graphs.py``): one task
per forward graph, measured first where the default step leaves the device idle, never where the phase's deadline
cannot hold the compiles. The measurement itself runs on the GPU (tests/gpu/test_cuda_graphs.py)."""

import dataclasses
import time

import pytest

from tuner.budget.clock import CAPTURE
from tuner.core import Kind
from tuner.db import Database
from tuner.measure.result import CaptureResult
from tuner.sweep.phases import CudaGraphPhase, SweepContext, Workload
from tuner.sweep.phases.forecast import forecast
from tuner.search_spaces.cuda_graph import CUDA_GRAPHS, on
from tuner.sweep.tasks import tasks_from_capture
from tests.helpers.notes import Notes


def _capture(step_ms=None, busy_ms=None):
    graph = {"kind": "cuda_graph", "device": "cuda", "lines": 40, "index": 0, "family": "f", "shapes": [[2, 3]]}
    graphs = [{**graph, "key": k, "keys": {"cuda_graph": k}, "backward": k == "bw"} for k in ("fw", "bw")]
    return CaptureResult(graphs, [], {}, {"info": {}}, {}, 1.0, step_ms=step_ms, busy_ms=busy_ms)


def test_one_task_per_forward_graph_whose_space_is_the_flag():
    tasks = [t for t in tasks_from_capture(_capture(), "m") if t.kind == Kind.CUDA_GRAPH]
    assert [t.key for t in tasks] == ["fw"] and "CUDA graphs" in tasks[0].name
    space = tasks[0].space
    assert space.default == {CUDA_GRAPHS: False} and space.is_valid(on()) and not space.is_valid({CUDA_GRAPHS: 1})


def test_the_idle_share_of_the_default_step():
    assert abs(_capture(17.0, 6.4).idle_share - (1 - 6.4 / 17.0)) < 1e-9
    assert _capture(17.0, None).idle_share is None and _capture(None, 6.4).idle_share is None
    assert _capture(2.0, 2.5).idle_share == 0.0  # a profiler's sum over overlapping kernels can pass the wall time


def _sweep(db_url, db, deadline_in=None):
    from tests.helpers.replay import _context

    tuning = _context(db_url, db, trials=4)
    tuning.costs.observe(CAPTURE, 30.0)
    if deadline_in is not None:
        now = time.monotonic()
        tuning = dataclasses.replace(tuning, deadline=now + deadline_in, settle_by=now + 10 * deadline_in)
    workload = Workload(db, "replay")
    workload.register(tasks_from_capture(_capture(), "m"))
    return SweepContext(tuning, worker=None, progress=Notes(), workload=workload, device_type="cuda", model="m")


def test_measured_only_where_the_device_waits_for_the_host(db_url):
    db = Database.open(db_url)
    sweep = _sweep(db_url, db)
    assert not CudaGraphPhase(0.01).plan(sweep)
    assert any("busy 99%" in n and "not measured" in n for n in sweep.progress.notes), sweep.progress.notes
    assert CudaGraphPhase(0.08).plan(sweep), "a step the GPU waits 8% of: CUDA graphs gained 8.5% on an LLM prefill"
    plan = CudaGraphPhase(0.62).plan(sweep)
    assert plan and plan.trials == 1 and [t.kind for t in plan.tasks] == [Kind.CUDA_GRAPH]
    assert any("waits for the host 62%" in n and "(~30 s)" in n for n in sweep.progress.notes), sweep.progress.notes
    assert CudaGraphPhase(None).plan(sweep), "unknown (no profiler): measured"
    db.close()


def test_no_measurement_when_its_compiles_do_not_fit_before_the_deadline(db_url):
    db = Database.open(db_url)
    sweep = _sweep(db_url, db, deadline_in=20.0)
    phase = CudaGraphPhase(0.62)  # a 30-s compile, 20 s left
    assert phase.plan(sweep)
    phase.run(sweep, sweep.tuning.deadline)
    assert any("no time left" in n for n in sweep.progress.notes) and db.stats()["trials"] == 0
    assert db.winner_config(sweep.workload.records[-1].id, sweep.tuning.device_id) == {CUDA_GRAPHS: False}, (
        "unmeasured, the task's answer is Inductor's own choice: a compile counts no miss for it"
    )
    db.close()


def test_a_recording_compile_keeps_the_time_kept_for_the_check(db_url):
    """The fusion recording and the kernel capture before the check start only when they end by the phases' deadline;
    the sweep's own deadline (the check's) is for the check."""
    db = Database.open(db_url)
    sweep = _sweep(db_url, db, deadline_in=20.0)  # a 30-s compile: past the phases' deadline, within the sweep's
    assert sweep.can_capture() and not sweep.can_capture(keep_end=True)
    db.close()


def test_the_forecast_counts_the_cuda_graph_measurement(db_url):
    db = Database.open(db_url)
    sweep = _sweep(db_url, db)
    assert (
        forecast(sweep, [], 0, cuda_graphs=CudaGraphPhase(0.62))[CudaGraphPhase.name] == 30.0
    )  # the candidate's compile
    assert forecast(sweep, [], 0, cuda_graphs=CudaGraphPhase(None))[CudaGraphPhase.name] == 30.0  # unknown: measured
    assert CudaGraphPhase.name not in forecast(sweep, [], 0, cuda_graphs=CudaGraphPhase(0.01))  # busy: not measured
    assert CudaGraphPhase.name not in forecast(sweep, [], 0)
    db.close()


def test_sites_are_timed_as_graph_replays_once_the_sweep_keeps_cuda_graphs(db_url, monkeypatch):
    """``TUNER_SITE_TIMING=auto`` (the default) times the sites as the workload will run: back to back until the
    workload's answer is CUDA graphs, then as graph replays; a set value is kept whatever the answer."""
    from tuner.settings import settings
    from tuner.sweep.phases.sites import site_timing

    db = Database.open(db_url)
    sweep = _sweep(db_url, db)
    CudaGraphPhase(0.62).plan(sweep)  # stores Inductor's own answer, off
    assert site_timing(sweep) == "pipelined"
    task = next(r for t, r in sweep.workload.pairs() if t.kind == Kind.CUDA_GRAPH)
    db.set_winner(task.id, sweep.tuning.device_id, None, on(), 1.0, 2.0)
    assert site_timing(sweep) == "cudagraph"
    monkeypatch.setenv("TUNER_SITE_TIMING", "pipelined")
    settings.cache_clear()
    try:
        assert site_timing(sweep) == "pipelined"
    finally:
        monkeypatch.delenv("TUNER_SITE_TIMING")
        settings.cache_clear()
    db.close()


def test_the_whole_workload_check_times_the_winners_against_the_defaults_under_cuda_graphs_once_kept(db_url):
    """Against the defaults alone, CUDA graphs' own gain hides a winner that slows the workload under them: once the
    sweep keeps CUDA graphs, they are the check's base, and the winners it may drop are the others."""
    from tuner.core import Forcing
    from tuner.sweep.phases.whole import _measurer, base_and_parts

    from tuner.core import TaskSpec
    from tuner.search_spaces import space_for

    db = Database.open(db_url)
    sweep = _sweep(db_url, db)
    rows = [["cuda", "bf16", 64, 64, 64, 1, 0], ["cuda", "bf16", 64, 64, 64, 1, 0]]
    sig = {"op": "mm", "inputs": rows, "space": {"choices": ["aten::mm:{}", "triton::mm:{}"], "default": "aten::mm:{}"}}
    (site,) = sweep.workload.register([TaskSpec("s" * 64, Kind.SITE, "mm 64x64", sig, space_for(Kind.SITE, sig))])
    db.set_winner(site.id, sweep.tuning.device_id, None, {"choice": "triton::mm:{}"}, 1.0, 2.0)
    CudaGraphPhase(0.62).plan(sweep)  # Inductor's own answer, off
    base, parts = base_and_parts(sweep)
    assert base == Forcing() and parts["template-site"].keys() == {site.id}
    (graph_task, rec) = next((t, r) for t, r in sweep.workload.pairs() if t.kind == Kind.CUDA_GRAPH)
    db.set_winner(rec.id, sweep.tuning.device_id, None, on(), 1.0, 2.0)
    base, parts = base_and_parts(sweep)
    assert base == graph_task.forcing(on()) and all(rec.id not in tasks for tasks in parts.values())
    assert parts["template-site"].keys() == {site.id}
    sweep.worker = Jobs()
    _measurer(sweep, base)(Forcing.union(parts["template-site"].values()))
    (job,) = sweep.worker.jobs
    assert job.baseline == base.to_json(), "the base alone"
    assert job.candidate == Forcing.union([base, *parts["template-site"].values()]).to_json(), (
        "the winners run under the base's CUDA graphs"
    )
    db.close()


class Jobs:
    """Stands in for the worker process (which compiles on the GPU): keeps the jobs it is sent."""

    alive = True

    def __init__(self):
        self.jobs = []

    def run(self, job):
        self.jobs.append(job)
        return None


class _Worker:
    """Answers the phase's jobs with the given measurements, by job type, and keeps the jobs it was given (the
    measurements themselves run on the GPU: tests/gpu/test_cuda_graphs.py)."""

    def __init__(self, **answers):
        self.answers, self.jobs = answers, []

    def run(self, job):
        self.jobs.append(type(job).__name__)
        return self.answers[type(job).__name__]


def _ok(ms, base, spread=0.001):
    from tuner.measure.result import Measurement, Status

    return Measurement(Status.OK, ms, ms, spread, base, compile_s=0.0, baseline_spread_ms=spread)


def test_a_replay_by_hand_decides_where_the_gain_is_clear_past_the_graphs_host_work():
    from tuner.measure.result import Measurement, Status
    from tuner.sweep.phases.cuda_graphs import GRAPH_HOST_MS, decided

    assert decided(_ok(0.57, 2.3), 0.02), "gpt2's decode step: 2.3 ms launched, 0.57 replayed"
    assert not decided(_ok(0.5, 0.9), 0.02), "a 0.9-ms step: Inductor's graphs may spend that on the host"
    assert decided(_ok(1.0, 1.0), 0.02) and decided(_ok(1.05, 1.0), 0.02), (
        "no faster by hand: Inductor's graphs are not either"
    )
    assert decided(_ok(GRAPH_HOST_MS * 0.9, GRAPH_HOST_MS * 1.5), 0.02)
    assert decided(Measurement(Status.RUNTIME_ERROR, error="x"), 0.02)  # no gain to find


def _replays():
    from tuner.measure.result import Measurement, Status

    return [
        (_ok(0.57, 2.3), ["GraphReplay"], True),
        (_ok(0.9, 0.9), ["GraphReplay"], False),
        (_ok(0.5, 0.9), ["GraphReplay", "GraphTrial"], True),
        (Measurement(Status.RUNTIME_ERROR, error="capture failed"), ["GraphReplay", "GraphTrial"], True),
    ]


@pytest.mark.parametrize("case", range(4))
def test_an_inference_step_is_replayed_by_hand_and_compiled_only_where_that_is_too_close(db_url, case):
    """By hand (no compile) where the replay decides; where it is too close, or fails, the workload is compiled under
    Inductor's CUDA graphs and that trial decides."""
    replay, jobs, kept = _replays()[case]
    db = Database.open(db_url)
    sweep = dataclasses.replace(_sweep(db_url, db), worker=_Worker(GraphReplay=replay, GraphTrial=_ok(0.6, 0.9)))
    phase = CudaGraphPhase(0.62, by_hand=True)
    assert phase.plan(sweep) and phase.compiles == 0
    phase.run(sweep, None)
    task = sweep.workload.records[-1]
    assert sweep.worker.jobs == jobs, (replay, sweep.worker.jobs)
    assert (db.winner_config(task.id, sweep.tuning.device_id) == on()) is kept, (replay, sweep.progress.notes)
    assert any("(replayed by hand)" in n for n in sweep.progress.notes) is (jobs == ["GraphReplay"]), (
        sweep.progress.notes
    )
    db.close()
