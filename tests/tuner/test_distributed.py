"""Several workers on one database: claims, expiry, resume."""

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time

import pytest
from sqlalchemy import func, select

from tests.helpers import replay
from tuner.db import Database
from tuner.db.models import Task, Trial, Winner


def _run_workers(url: str, n: int, trials: int = 5, work=replay.work, together: bool = False):
    """``together``: the workers start tuning at one moment (a barrier), not as each process happens to come up."""
    Database.open(url).close()  # create the schema once, before the race
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    extra = (ctx.Barrier(n),) if together else ()
    procs = [ctx.Process(target=work, args=(url, trials, q, *extra)) for _ in range(n)]
    for p in procs:
        p.start()
    results = [q.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return results


def _state(url):
    db = Database.open(url, create=False)
    with db.session() as s:
        per_task = dict(s.execute(select(Task.key, func.count(Trial.id)).join(Trial).group_by(Task.key)).all())
        distinct = dict(
            s.execute(
                select(Task.key, func.count(func.distinct(Trial.config_hash))).join(Trial).group_by(Task.key)
            ).all()
        )
        uids = s.scalars(select(Trial.uid)).all()
        winners = {w.task.key: w.config for w in s.scalars(select(Winner))}
    db.close()
    return per_task, distinct, uids, winners


@pytest.mark.parametrize("backend", ["postgres", "sqlite"])
def test_eight_workers_share_a_sweep_without_tuning_anything_twice(backend, request, tmp_path):
    url = request.getfixturevalue("pg_url") if backend == "postgres" else f"sqlite:///{tmp_path / 'shared.db'}"
    results = _run_workers(url, 8)
    tuned = [k for keys, _ in results for k in keys]
    assert sorted(tuned) == sorted(t.key for t in replay.tasks()), "every task tuned, none twice"
    per_task, distinct, uids, winners = _state(url)
    assert len(uids) == len(set(uids))
    for t in replay.tasks():
        target = min(5, t.space.size())
        assert distinct[t.key] == target  # no config measured twice, none lost
        assert per_task[t.key] - distinct[t.key] <= 1  # at most the winner's re-measurement

    single = f"sqlite:///{tmp_path / 'single.db'}"
    _run_workers(single, 1)
    assert _state(single)[3] == winners, "the same winners as one worker, under the same (replayed) measurements"


def test_rerun_after_sigkill_keeps_every_trial_and_completes(tmp_path, db_url, cwd_root):
    cmd = [
        sys.executable,
        "-m",
        "tuner",
        "sweep",
        "--model",
        "tests.helpers.models:mlp",
        "--input-shape",
        "16,64",
        "--device",
        "cpu",
        "--threads",
        "2",
        "--budget",
        "quick",
        "--trials",
        "3",
        "--db",
        db_url,
    ]
    env = {**os.environ, "PYTHONPATH": str(cwd_root)}
    proc = subprocess.Popen(
        cmd, cwd=cwd_root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 240
    before: set[str] = set()
    while time.monotonic() < deadline:
        time.sleep(1)
        try:
            before = set(_state(db_url)[2])
        except Exception:
            continue
        if len(before) >= 4:
            break
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its measurement worker, mid-sweep
    proc.wait(30)
    assert len(before) >= 4
    done = subprocess.run(cmd, cwd=cwd_root, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    per_task, distinct, uids, winners = _state(db_url)
    assert before <= set(uids), "every trial stored before the kill is still there"
    # Freezing, measured once, first. Frozen: the 2 sites, codegen knobs and fusion grouping too. Where the workload
    # won unfrozen (this small graph wins either way within a few percent), it was captured again unfrozen and only
    # that graph's codegen knobs and fusion grouping were tuned.
    db = Database.open(db_url, create=False)
    with db.session() as s:
        once = set(s.scalars(select(Task.key).where(Task.kind == "freezing")))
    db.close()
    assert len(once) == 1
    unfrozen = winners.get(next(iter(once))) == {"freezing": False}
    assert len(winners) == (3 if unfrozen else 5) and set(winners) == set(distinct)
    assert all(v >= 2 for k, v in distinct.items() if k not in once)


def test_from_similar_seeds_a_study_with_other_devices_winners(tmp_path):
    import dataclasses

    from tuner.budget.presets import make_budget
    from tuner.db import DeviceInfo
    from tuner.study.context import open_storage, StudyContext
    from tuner.study.study import run_study

    url = f"sqlite:///{tmp_path / 's.db'}"
    db = Database.open(url)
    task = replay.tasks()[0]
    rec = db.upsert_task(task.key, task.kind, task.name, task.signature, task.space.fingerprint())
    other = db.device_id(DeviceInfo("cpu", "Other CPU", {"cores": 64}))
    seed_cfg = {**task.space.default, "cpp.simdlen": 0, "cpp.min_chunk_size": 4096}
    db.set_winner(rec.id, other, None, seed_cfg, 1.0, 2.0)
    measured = []

    def measure(config, rounds):
        measured.append(config)
        return replay.replay_measure(config, rounds)

    for from_similar, expect in ((False, False), (True, True)):
        dev = db.device_id(DeviceInfo("cpu", f"Fresh {from_similar}", {}))
        ctx = StudyContext(
            db=db,
            storage=open_storage(url),
            device_id=dev,
            environment_id=db.environment_id(replay.ENV),
            device_fingerprint=str(dev) * 16,
            sampler="random",
            seed=1,
            budget=dataclasses.replace(make_budget("quick"), trials=2),
            from_similar=from_similar,
        )
        measured.clear()
        run_study(ctx, rec, task.space, measure)
        # A graph's knobs: no default trial (each trial times the default beside it), so the seed comes first.
        assert (measured[0] == seed_cfg) is expect


def test_combined_report_shows_what_the_checker_reverted_and_its_whole_workload_figures():
    from tuner.db.repository import TaskRecord
    from tuner.sweep.distributed import combine
    from tuner.core import TaskOutcome
    from tuner.sweep.options import SweepReport

    a, b = (TaskRecord(i, f"k{i}", "template_choice", f"site {i}", {}) for i in (1, 2))
    won = TaskOutcome(a, {"choice": "triton"}, False, 2.0, 1.0, 10, 10)
    first = SweepReport(
        "m", "H200", {}, None, None, [won, TaskOutcome(b, {"choice": "aten"}, True, 1.0, 1.0, 0, 5)], wall_s=50
    )
    stored = TaskOutcome(
        a, {"choice": "aten"}, True, None, None, 0, 10
    )  # the checker reverted site 1, measured by the other
    last = SweepReport(
        "m",
        "H200",
        {},
        None,
        None,
        [stored, TaskOutcome(b, {"choice": "aten"}, True, 1.0, 1.0, 5, 5)],
        3.0,
        2.9,
        wall_s=80,
    )
    last.whole_checked = True
    merged = combine([first, last])
    one = next(o for o in merged.outcomes if o.task.id == 1)
    assert one.is_default and one.winner == {"choice": "aten"} and one.measured == 10 and one.best_ms == 2.0
    assert (merged.default_ms, merged.tuned_ms, merged.wall_s) == (3.0, 2.9, 80)


def test_merged_progress_counts_a_phase_once_and_labels_each_workers_lines():
    from tuner.sweep.distributed import MergedProgress
    from tuner.sweep.progress import Progress

    class Seen(Progress):
        def __init__(self):
            self.calls = []

        def start(self, total, names):
            self.calls.append(("start", total))

        def task(self, name):
            self.calls.append(("task", name))

        def trial(self, status):
            self.calls.append(("trial", status))

        def note(self, text):
            self.calls.append(("note", text))

    seen = Seen()
    m = MergedProgress(seen, 2)
    for index, method, args in [
        (0, "start", (10, ["a", "b"])),
        (1, "start", (10, ["a", "b"])),  # both plan the same shared sites
        (1, "task", ("a",)),
        (1, "trial", ("ok",)),
        (0, "trial", ("failed",)),
        (1, "start", (6, ["k"])),
        (0, "start", (6, ["k"])),
        (0, "note", ("done",)),
    ]:
        m.handle(index, method, args)
    assert seen.calls == [
        ("start", 10),
        ("task", "worker 2/2: a"),
        ("trial", "ok"),
        ("trial", "failed"),
        ("start", 6),
        ("note", "worker 1/2: done"),
    ]


def test_the_bar_never_shows_more_trials_than_its_total():
    """Joined trials can outnumber a phase's plan (a two-worker sweep once showed "13/11 trials"): the total grows."""
    import io

    from rich.console import Console

    from tuner.cli.render import RichProgress

    out = io.StringIO()
    with RichProgress(Console(file=out, width=100)) as bar:
        bar.start(2, ["a"])
        for _ in range(3):
            bar.trial("ok")
        shown = bar.bar.tasks[0]
        assert (shown.completed, shown.total) == (3, 3)
        bar.start(4, ["b"])  # the next phase adds its plan to what was done
        assert bar.bar.tasks[0].total == 7


def test_the_bar_left_on_screen_says_the_sweep_ended_with_nothing_to_wait_for():
    import io
    import time

    from rich.console import Console

    from tuner.cli.render import RichProgress

    for trials in (1, 0):  # none done: Rich would serve the time left it rendered within the last half second
        out = io.StringIO()
        with RichProgress(Console(file=out, width=100), ends_by=time.monotonic() + 600) as bar:
            bar.start(50, ["a"])
            bar.task("a kernel")
            for _ in range(trials):
                bar.trial("ok")
            bar.bar.refresh()
        last = out.getvalue().strip().splitlines()[-1]
        assert last.startswith("ended") and f"{trials}/50 trials" in last and last.endswith("eta 0:00:00"), last


@pytest.mark.parametrize("backend", ["postgres", "sqlite"])
def test_workers_with_nothing_to_claim_join_a_running_study(backend, request, tmp_path):
    url = request.getfixturevalue("pg_url") if backend == "postgres" else f"sqlite:///{tmp_path / 'joined.db'}"
    results = _run_workers(url, 2, 24, replay.work_joined, together=True)
    holders = [r for r in results if r[1]]
    assert len(holders) == 1, "one worker holds the task and picks its winner"
    assert all(measured > 0 for _, _, measured in results), "the other joined its study and measured too"
    per_task, distinct, _, winners = _state(url)
    (key,) = per_task
    assert 24 <= distinct[key] <= 25  # the target, counted across both workers (one may overshoot by its last trial)
    assert (
        per_task[key] - distinct[key] <= 2
    )  # no config measured twice but by a rare simultaneous ask, and the verification
    assert key in winners
