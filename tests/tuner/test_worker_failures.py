"""Failing and crashing trials are stored with their status, never retried, and never stop the sweep."""

import dataclasses

from tuner.core import Forcing
from tuner.budget.presets import make_budget
from tuner.db import Database, DeviceInfo, EnvironmentInfo
from tuner.measure import GraphTrial, Status, Worker
from tuner.study.context import StudyContext
from tuner.study.study import run_study
from tuner.search_spaces import Space
from tuner.search_spaces.base import choice
from tuner.workloads.spec import WorkloadSpec


def _ctx(db, url):
    import optuna

    dev = DeviceInfo("cpu", "test", {})
    return StudyContext(
        db=db,
        storage=optuna.storages.RDBStorage(url),
        device_id=db.device_id(dev),
        environment_id=db.environment_id(EnvironmentInfo("t", None, None, "3", "0")),
        device_fingerprint=dev.fingerprint,
        sampler="grid",
        seed=0,
        budget=dataclasses.replace(make_budget("quick"), rounds=3, min_sample_ms=2.0),
    )


def test_compile_errors_are_stored_and_never_retried(db_url, tmp_path, cwd_root):
    spec = WorkloadSpec(model="tests.helpers.models:mlp", input_shape=(16, 64), threads=2)
    worker = Worker(spec, tmp_path / "logs")
    capture = worker.start()
    site = capture.sites[0]
    cpp_choice = next(c for c in site["choices"] if c.startswith("cpp:"))
    graph = capture.graphs[0]["key"]
    # A space that (wrongly) admits a thread split Inductor rejects: its trial must fail at compile time.
    space = Space("test", (choice("cpp.gemm_thread_factors", [None, "1,1,3"]),), {"cpp.gemm_thread_factors": None})
    db = Database.open(db_url)
    task = db.upsert_task("t" * 64, "test", "bad gemm split", {}, space.fingerprint())
    calls = []

    def measure(config, rounds):
        calls.append(config)
        baseline = {"template_choice": {site["key"]: cpp_choice}}
        candidate = {**baseline, "cpp_graph": {graph: config}}
        return worker.run(GraphTrial(baseline, candidate, rounds, 2.0))

    ctx = _ctx(db, db_url)
    assert run_study(ctx, task, space, measure) == 2
    statuses = {t.config["cpp.gemm_thread_factors"]: t for t in db.trials(task.id, ctx.device_id)}
    assert statuses[None].status == "ok"
    assert statuses["1,1,3"].status == "compile_error" and "AssertionError" in statuses["1,1,3"].error
    assert run_study(ctx, task, space, measure) == 0 and len(calls) == 2  # nothing measured twice
    # What the worker holds compiled for the next trial (its first trial's cost: one compile, not two).
    baseline = Forcing({"template_choice": {site["key"]: cpp_choice}})
    assert not worker.holds(baseline), "the last trial failed to compile: nothing is known to be held"
    assert measure({"cpp.gemm_thread_factors": None}, 3).ok
    candidate = baseline.merged(Forcing({"cpp_graph": {graph: {"cpp.gemm_thread_factors": None}}}))
    assert worker.holds(baseline) and worker.holds(candidate) and not worker.holds(Forcing())
    proc = worker._proc
    worker.close()
    assert proc.exitcode == 0, "a stopped worker leaves by itself (tuner.measure.worker._leave), not killed"
    assert not worker.holds(baseline), "a worker that starts again holds nothing"


def test_a_worker_killed_by_generated_code_is_a_stored_trial_not_a_dead_sweep(db_url, tmp_path, cwd_root, monkeypatch):
    flag = tmp_path / "crash-now"
    monkeypatch.setenv("TUNER_TEST_CRASH", str(flag))
    spec = WorkloadSpec(model="tests.helpers.models:crash_in_worker", input_shape=(4, 8), threads=1)
    worker = Worker(spec, tmp_path / "logs")
    worker.start()
    flag.touch()  # from now on the model segfaults when it runs
    m = worker.run(GraphTrial({}, {}, 3, 1.0))
    assert m.status is Status.WORKER_DIED and "SIGSEGV" in m.error
    flag.unlink()
    m2 = worker.run(GraphTrial({}, {}, 3, 1.0))  # a fresh worker takes over
    assert m2.status is Status.OK and worker.restarts == 1
    worker.close()
