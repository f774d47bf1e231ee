"""The template-site phase tunes the sites of the graphs as the kept winners lower them, on the CPU for real: a
spawned worker, real Inductor compiles, real SQLite. A winner that changes which sites exist (here: the frozen mlp's
graph compiled unfrozen, where its packed-linear sites are gone) has the first site batch, compiled with every winner
forced, record the sites it meets; a winner that only groups kernels (a fusion knob) changes nothing."""

from tests.helpers.replay import _context
from tuner.core import Kind
from tuner.db import Database
from tuner.db.claims import pending
from tuner.measure import Worker
from tuner.search_spaces.freezing import unfrozen
from tuner.budget.clock import now
from tuner.sweep.phases import FusionPhase, SitePhase, SweepContext, Workload
from tuner.sweep.tasks import fusion_tasks, tasks_from_capture
from tuner.workloads.spec import WorkloadSpec


class Notes(list):
    def note(self, text: str) -> None:
        self.append(" ".join(text.split()))

    def __getattr__(self, name):  # the progress bar's other calls
        return lambda *a, **k: None


def captured(spec: WorkloadSpec, tmp_path, db):
    """A sweep's context after the capture of ``spec``'s model, its task records by kind, its sites' keys and its notes."""
    worker = Worker(spec, tmp_path / "logs")
    capture = worker.start()
    workload = Workload(db, "mlp")
    tasks = tasks_from_capture(capture, "mlp") + fusion_tasks(capture.graphs, "mlp")
    records = dict(zip((t.kind for t in tasks), workload.register(tasks)))
    keys = {t.key for t, _ in workload.pairs((Kind.SITE,))}
    notes = Notes()
    sweep = SweepContext(
        _context(db.url, db, trials=4), worker, notes, workload, spec.device, "mlp", recorded=capture.graphs
    )
    return sweep, records, keys, notes


def _captured(model, tmp_path, db, shape=(16, 64)):
    """``captured`` on the CPU: two packed-linear sites when frozen (an mlp, an attention block)."""
    sweep, records, keys, notes = captured(
        WorkloadSpec(model=model, device="cpu", input_shape=shape, threads=1), tmp_path, db
    )
    assert len(keys) == 2  # the frozen mlp's two packed linears
    return sweep, records, keys, notes


def test_the_sites_tuned_are_those_the_kept_winners_lower(tmp_path, db_url):
    """A fusion knob costs nothing; unfreezing has the first site batch compile unfrozen and record the sites it meets:
    the packed-linear sites it never met are dropped unmeasured and released, the new ones are tuned after them, and
    the recording is held for the phases after."""
    db = Database.open(db_url)
    sweep, records, captured, notes = _captured("tests.helpers.models:mlp", tmp_path, db)
    try:
        fusion = next(t for t in sweep.workload.tasks if t.kind == Kind.FUSION)
        knob = {**fusion.space.default, "max_fusion_size": 8 if fusion.space.default["max_fusion_size"] != 8 else 16}
        db.set_winner(records[Kind.FUSION].id, sweep.tuning.device_id, None, knob, None, None)
        phase = SitePhase()
        assert {t.key for t in phase.plan(sweep).tasks} == captured and not phase.lowered and notes == []

        db.set_winner(records[Kind("freezing")].id, sweep.tuning.device_id, None, unfrozen(), None, None)
        plan = phase.plan(sweep)
        assert (
            {t.key for t in plan.tasks} == captured and phase.to_record and sweep.recordings == {}
        )  # no compile of its own
        assert notes.pop().startswith(
            "the winners so far change how the graphs lower (mlp forward graph 0 freezing): the first site batch"
        )
        phase.run(sweep, now() + 60.0)
        (recording,) = sweep.recordings.values()
        assert recording.graphs and all(not g["frozen"] for g in recording.graphs)
        assert recording.sites == []  # unfrozen, the CPU lowers its linears through ATen alone: no site at all
        assert (
            "the template sites tuned are those a compile with them forced meets, 0: 0 of the capture's 2 and 0 new"
            in notes[-1]
        ), notes
        ids = [r.id for _, r in sweep.workload.pairs((Kind.SITE,))]
        assert all(not db.trials(i, sweep.tuning.device_id) for i in ids)  # dropped, nothing stored
        assert pending(db, ids, sweep.tuning.device_id, sweep.tuning.budget.site_target) == len(
            ids
        )  # released, not finished
        assert phase.plan(sweep).tasks == [] and not phase.to_record  # the held recording: no compile, no site
    finally:
        sweep.worker.close()
        db.close()


def test_a_recording_that_fails_leaves_the_captured_fusions_to_search(tmp_path, db_url, monkeypatch):
    """The fusion study's recording compile's worker dies (a segfault, for real): the study says so and searches the
    fusions the capture recorded; the sweep goes on, the next job in a fresh worker."""
    flag = tmp_path / "crash"
    monkeypatch.setenv("TUNER_TEST_CRASH", str(flag))
    db = Database.open(db_url)
    sweep, records, captured, notes = _captured("tests.helpers.models:mlp_crash_in_worker", tmp_path, db)
    try:
        db.set_winner(records[Kind("freezing")].id, sweep.tuning.device_id, None, unfrozen(), None, None)
        flag.touch()
        fusion = next(t for t in sweep.workload.tasks if t.kind == Kind.FUSION)
        assert [t.key for t in FusionPhase().plan(sweep).tasks] == [fusion.key] and sweep.recordings == {}
        assert notes[0] == "recording the fusions Inductor makes with the winners so far forced", notes
        assert notes[1].startswith("recording the fusions with the winners so far forced failed (") and notes[
            1
        ].endswith("the fusions the capture recorded are searched"), notes
    finally:
        sweep.worker.close()
        db.close()


def test_only_winners_that_change_which_sites_exist_count():
    """A fusion knob or veto groups the kernels a lowering made; a rewrite or unfreezing changes the graph lowered. A
    fused attention backend is one library call whichever it is; ``math`` lowers into GEMM sites of its own. Any
    other kind: any config but its default."""
    from tuner.backend.defaults import fusion_defaults
    from tuner.search_spaces import space_for
    from tuner.search_spaces.fusion import FREEZING, SPACE_TO_DEPTH
    from tuner.search_spaces.fusion import space as fusion_space

    fusion = fusion_space(
        {"device": "cuda", "defaults": fusion_defaults("cuda"), "pairs": ["a|b"], "s2d_convs": 1, "frozen": 1}
    )
    d = fusion.default
    assert not fusion.reshapes_sites(d) and not fusion.reshapes_sites({**d, "max_fusion_size": 8, "veto.a|b": True})
    assert fusion.reshapes_sites({**d, SPACE_TO_DEPTH: True}) and fusion.reshapes_sites({**d, FREEZING: False})
    site = {"site": "0" * 16, "backend": "efficient", "mask": True, "count": 12}
    attention = space_for("attention", {"space": {"device": "cuda", "sites": [site]}})
    name = f"site.{site['site']}"
    assert not attention.reshapes_sites({name: "cudnn"}) and attention.reshapes_sites({name: "math"})
    freezing = space_for("freezing", {"space": {}})
    assert freezing.reshapes_sites(unfrozen()) and not freezing.reshapes_sites(freezing.default)
