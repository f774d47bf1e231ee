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
