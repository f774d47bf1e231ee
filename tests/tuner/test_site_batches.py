"""Site batches: a failing batch is split until only the failing choice is charged with the failure.
The measurements are scripted (a batch fails whenever it contains the bad choice), as in the replay tests."""

from tuner.measure.result import SiteTimings, Status
from tuner.site_batches import measure_split


def _batch(request):
    calls.append({k: tuple(v) for k, v in request.items()})
    if any("bad" in v for v in request.values()):
        return SiteTimings(Status.WORKER_DIED, error="worker process killed by SIGSEGV")
    return SiteTimings(Status.OK, {k: {c: 1.0 + i / 10 for i, c in enumerate(v)} for k, v in request.items()})


calls: list = []


def test_a_crashing_choice_costs_only_itself():
    calls.clear()
    req = {"s1": ("aten", "t1", "bad", "t3"), "s2": ("aten", "u1", "u2")}
    out = measure_split(_batch, req)
    assert out["s1"]["bad"].status is Status.WORKER_DIED
    assert all(out["s1"][c].ok for c in ("aten", "t1", "t3"))
    assert all(m.ok for m in out["s2"].values())
    assert out["s2"]["u2"].ratio == 1.2 and out["s2"]["aten"].ratio == 1.0  # against the default of the same compile
    assert len(calls) == 7  # all, s1 (fails), halves of s1 until the bad choice stands alone, s2


def test_a_clean_batch_is_one_compile():
    calls.clear()
    out = measure_split(_batch, {"s1": ("aten", "t1")})
    assert len(calls) == 1 and out["s1"]["t1"].ratio == 1.1


def _sites(db_url):
    from tests.helpers.replay import _context, tasks
    from tuner.db import Database

    db = Database.open(db_url)
    group = [(t, db.upsert_task(t.key, t.kind, t.name, t.signature, t.space.fingerprint())) for t in tasks()[-2:]]
    return db, _context(db_url, db, trials=8), group


def _slow(calls, per_choice_s):
    """Every choice of a batch costs ``per_choice_s``; each candidate is slower than its site's default."""
    import time

    def measure(request):
        n = sum(len(v) for v in request.values())
        calls.append(n)
        time.sleep(per_choice_s * n)
        return SiteTimings(Status.OK, {k: {c: 1.0 + i / 10 for i, c in enumerate(v)} for k, v in request.items()})

    return measure


def test_without_a_deadline_a_batch_offers_every_site_all_it_can(db_url):
    from tuner.site_batches import tune_sites

    db, tuning, group = _sites(db_url)
    calls = []
    _, measured, cut = tune_sites(tuning, group, _slow(calls, 0.0), batch=16)
    assert calls == [8] and measured == 8 and cut == set()  # two sites, each its default and its 3 other choices
    db.close()


def test_a_first_batch_probes_the_cost_and_no_batch_runs_past_the_deadline(db_url):
    import dataclasses
    import time

    from tuner.site_batches import PROBE_CHOICES, tune_sites

    db, tuning, group = _sites(db_url)
    calls = []
    t0 = time.monotonic()
    # Room for the probe (0.8 s) and the studies' opening on a loaded machine, none for a second batch (0.8 s more).
    tuning = dataclasses.replace(tuning, deadline=t0 + 1.5, settle_by=t0 + 5)
    _, measured, cut = tune_sites(tuning, group, _slow(calls, 0.2), batch=16)
    assert len(calls) == 1 and calls[0] <= 2 * (1 + PROBE_CHOICES)  # the probe; no second batch fits the rest
    assert time.monotonic() - t0 < 1.5 and cut == {r.id for _, r in group}  # released, so a rerun continues them
    db.close()
