"""Template sites that a site batch's compile never meets (a kept rewrite lowers the graph without them): dropped
unmeasured, released, and no reason to end the phase. The measurements are scripted, as in ``test_site_batches``."""

from tests.tuner.test_site_batches import _sites
from tuner.measure.result import SiteTimings, Status
from tuner.budget.estimate import SITE_CHOICE
from tuner.sweep.site_batches import PROBE_CHOICES


def test_a_site_its_batch_never_met_is_dropped_unmeasured_and_released(db_url):
    """The first batch's compile lowers the graph without one site (a kept rewrite replaced it): that site's choices
    are never measured nor stored, it is asked nothing more and not verified, and it is said apart from the sites the
    deadline cut (both are released, not finished); its choices count nothing in the batches' cost; the other site is
    tuned as ever."""
    from tuner.sweep.site_batches import tune_sites

    db, tuning, group = _sites(db_url)
    (gone, _), (kept, _) = group
    calls = []

    def measure(request):
        calls.append(sorted(request))
        timings = {k: {c: 1.0 + i / 10 for i, c in enumerate(v)} for k, v in request.items() if k != gone.key}
        return SiteTimings(Status.OK, timings, met=tuple(timings))

    outcomes, measured, cut, dropped = tune_sites(tuning, group, measure, batch=16)
    assert calls[0] == sorted([gone.key, kept.key]) and all(c == [kept.key] for c in calls[1:])
    assert [o.task.key for o in outcomes] == [kept.key] and dropped == {group[0][1].id} and cut == set()
    assert (
        db.trials(group[0][1].id, tuning.device_id) == []
        and measured == len(db.trials(group[1][1].id, tuning.device_id)) > 0
    )
    (first_n, _), *_ = tuning.costs.sized[SITE_CHOICE]
    assert first_n == PROBE_CHOICES  # the probe's choices at the site it met
    db.close()


def test_a_group_whose_sites_no_compile_met_does_not_end_the_phase(db_url):
    """Two workers' share each (a group a site): the first group's site is gone under the winners forced, so its
    group measures nothing, yet the phase goes on to the next group, and the gone site is released, not finished."""
    from tuner.db.claims import pending
    from tuner.sweep.progress import Progress
    from tuner.sweep.scheduler import tune_site_groups

    db, tuning, group = _sites(db_url)
    gone = group[0][0].key

    def measure(request):
        timings = {k: {c: 1.0 + i / 10 for i, c in enumerate(v)} for k, v in request.items() if k != gone}
        return SiteTimings(Status.OK, timings, met=tuple(timings))

    outcomes, measured = tune_site_groups(tuning, group, measure, 16, 2, Progress())
    assert [o.task.key for o in outcomes.values()] == [group[1][0].key] and measured > 0
    assert pending(db, [group[0][1].id], tuning.device_id, tuning.budget.site_target) == 1  # released
    assert pending(db, [group[1][1].id], tuning.device_id, tuning.budget.site_target) == 0  # finished
    db.close()
