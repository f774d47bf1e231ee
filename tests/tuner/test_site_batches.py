"""Site batches: a failing batch is split until only the failing choice is charged with the failure.
The measurements are scripted (a batch fails whenever it contains the bad choice), as in the replay tests."""

import pytest

from tuner.measure.result import SiteTimings, Status
from tuner.sweep.site_batches import measure_split


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


class _SimulatedClock:
    """The deadline's clock: it moves only when a simulated batch runs, so Optuna's and SQLite's own time on a
    loaded machine never decides what a test sees."""

    def __init__(self) -> None:
        self.t = 1000.0

    def now(self) -> float:
        return self.t


def _slow(calls, per_choice_s, clock=None):
    """Every choice of a batch costs ``per_choice_s`` (on ``clock``, else slept); each candidate is slower than its
    site's default. ``calls`` gets each batch's size and, with a clock, when it ended."""
    import time

    def measure(request):
        n = sum(len(v) for v in request.values())
        if clock is None:
            time.sleep(per_choice_s * n)
            calls.append(n)
        else:
            clock.t += per_choice_s * n
            calls.append((n, clock.t))
        return SiteTimings(Status.OK, {k: {c: 1.0 + i / 10 for i, c in enumerate(v)} for k, v in request.items()})

    return measure


def test_without_a_deadline_a_probe_then_one_batch_offers_every_site_all_it_can(db_url):
    from tuner.sweep.site_batches import tune_sites

    db, tuning, group = _sites(db_url)
    calls = []
    _, measured, cut, _ = tune_sites(tuning, group, _slow(calls, 0.001), batch=16)
    # A probe first (each site's default and one candidate: the cost per choice, so the ETA is measured), then
    # every site's default and all its other choices in one batch; two sites of four choices each.
    assert calls == [4, 6] and measured == 8 and cut == set()
    db.close()


def test_a_first_batch_probes_the_cost_and_no_batch_runs_past_the_deadline(db_url, monkeypatch):
    import dataclasses

    from tuner.sweep.site_batches import PROBE_CHOICES, tune_sites

    clock = _SimulatedClock()
    monkeypatch.setattr("tuner.budget.clock.now", clock.now)
    db, tuning, group = _sites(db_url)
    calls = []
    # Room for the probe (2 sites x 2 choices, the first trial being the default, x 0.2 s = 0.8 s), none for a
    # second batch (each site's default and one candidate more: 0.8 s).
    deadline = clock.t + 1.5
    tuning = dataclasses.replace(tuning, deadline=deadline, settle_by=clock.t + 5)
    _, measured, cut, _ = tune_sites(tuning, group, _slow(calls, 0.2, clock), batch=16)
    assert [n for n, _ in calls] == [2 * PROBE_CHOICES]  # the probe only; no second batch fits the rest
    assert all(end <= deadline for _, end in calls) and measured == 2 * PROBE_CHOICES
    assert cut == {r.id for _, r in group}  # released, so a rerun continues them
    db.close()


def test_with_room_for_more_a_second_batch_is_sized_to_end_by_the_deadline(db_url, monkeypatch):
    import dataclasses

    from tuner.sweep.site_batches import tune_sites

    clock = _SimulatedClock()
    monkeypatch.setattr("tuner.budget.clock.now", clock.now)
    db, tuning, group = _sites(db_url)
    calls = []
    deadline = clock.t + 2.1  # the probe (0.8 s), then 1.3 s: each site's default and its last two choices (1.2 s)
    tuning = dataclasses.replace(tuning, deadline=deadline, settle_by=clock.t + 5)
    _, measured, cut, _ = tune_sites(tuning, group, _slow(calls, 0.2, clock), batch=16)
    assert [n for n, _ in calls] == [4, 6] and all(end <= deadline for _, end in calls)
    assert measured == 8 and cut == set()  # every choice of both sites measured, by the deadline
    db.close()


@pytest.mark.parametrize("sweep_left_s", [1.0, 10.0])
def test_with_no_time_to_verify_only_a_clear_gain_wins_on_its_batch_timing(db_url, monkeypatch, sweep_left_s):
    """The probe finds one site 20% faster and the other 5% faster; nothing is left of the phase for the
    verification compile, whether or not the sweep has time left after it (the next phases' time is theirs).
    The 20% gain (far past the noise, timed beside its default in a compile that chose it and passed the numerics
    check) is stored as the winner; the 5% one keeps Inductor's default until a verified run."""
    import dataclasses

    from tuner.sweep.site_batches import UNVERIFIED_GAIN, tune_sites

    clock = _SimulatedClock()
    monkeypatch.setattr("tuner.budget.clock.now", clock.now)
    db, tuning, group = _sites(db_url)
    (t1, r1), (t2, r2) = group
    faster = {t1.key: 0.8, t2.key: 0.95}
    assert 1 - faster[t1.key] > UNVERIFIED_GAIN > 1 - faster[t2.key] > tuning.budget.min_gain

    def measure(request):
        clock.t += 0.2 * sum(len(v) for v in request.values())
        return SiteTimings(
            Status.OK, {k: {c: (1.0 if i == 0 else faster[k]) for i, c in enumerate(v)} for k, v in request.items()}
        )

    tuning = dataclasses.replace(tuning, deadline=clock.t + 1.0, settle_by=clock.t + sweep_left_s)
    outcomes, measured, _, _ = tune_sites(tuning, group, measure, batch=16)
    by_id = {o.task.id: o for o in outcomes}
    assert measured == 4
    assert not by_id[r1.id].is_default and by_id[r1.id].speedup == 1.25
    assert db.winner_config(r1.id, tuning.device_id) == by_id[r1.id].winner
    assert by_id[r2.id].is_default and db.winner_config(r2.id, tuning.device_id) == t2.space.default
    db.close()


def _affine(calls, fixed_s, per_choice_s, clock, gain=-0.1):
    """A batch costs a compile (``fixed_s``) plus ``per_choice_s`` per choice, on ``clock``; each candidate is
    ``gain`` x 1 ms faster than the one before it (by default slower: no finalist to verify)."""

    def measure(request):
        n = sum(len(v) for v in request.values())
        clock.t += fixed_s + per_choice_s * n
        calls.append((n, clock.t))
        return SiteTimings(Status.OK, {k: {c: 1.0 - gain * i for i, c in enumerate(v)} for k, v in request.items()})

    return measure


@pytest.mark.parametrize("prior, sizes, measured_choices", [(0.1, [4, 6], 8), (None, [4, 4], 6)])
def test_a_batch_is_sized_as_a_compile_plus_a_share_per_choice(db_url, monkeypatch, prior, sizes, measured_choices):
    """Batches cost 1 s of compile plus 0.1 s per choice. The probe (each site's default and first candidate: 4
    choices) takes 1.4 s; 1.7 s are left. Known to be mostly compile (a prior share of 0.1 s per choice), the second
    batch offers both sites' two remaining candidates (6 choices with the defaults, 1.6 s): all 8 measured. Taken
    as all per choice (0.35 s, no prior), it offers one candidate per site, and the last two stay unmeasured."""
    import dataclasses

    from tuner.budget.estimate import SITE_CHOICE
    from tuner.sweep.site_batches import tune_sites

    clock = _SimulatedClock()
    monkeypatch.setattr("tuner.budget.clock.now", clock.now)
    db, tuning, group = _sites(db_url)
    if prior is not None:
        tuning.costs.slopes[SITE_CHOICE] = prior
    deadline = clock.t + 1.4 + 1.7
    tuning = dataclasses.replace(tuning, deadline=deadline, settle_by=clock.t + 10)
    calls = []
    _, measured, _, _ = tune_sites(tuning, group, _affine(calls, 1.0, 0.1, clock), batch=16)
    assert [n for n, _ in calls][: len(sizes)] == sizes
    assert all(end <= deadline for _, end in calls[: len(sizes)])
    assert measured == measured_choices
    db.close()


def _known_costs(db_url, monkeypatch, left_s):
    """Two sites whose batches are known to cost 1 s of compile (the capture's) plus 0.1 s per choice (the prior
    share), on a simulated clock, with ``left_s`` to the deadline."""
    import dataclasses

    from tuner.budget.clock import CAPTURE
    from tuner.budget.estimate import SITE_CHOICE

    clock = _SimulatedClock()
    monkeypatch.setattr("tuner.budget.clock.now", clock.now)
    db, tuning, group = _sites(db_url)
    tuning.costs.slopes[SITE_CHOICE] = 0.1
    tuning.costs.observe(CAPTURE, 1.0)
    deadline = clock.t + left_s
    return db, dataclasses.replace(tuning, deadline=deadline, settle_by=clock.t + 10), group, clock, deadline


def test_with_a_prior_share_and_a_measured_compile_the_first_batch_is_sized_to_the_deadline(db_url, monkeypatch):
    """No probe where the device has a prior share per choice and the capture's compile was timed: batches cost 1 s
    of compile plus 0.1 s per choice, the prior share, taken at ``PRIOR_MARGIN`` (0.2 s) until a batch has measured
    it. 2.65 s are left, so the first batch offers each site its default and two candidates (6 choices: 2.2 s at the
    margin, 1.6 s as it runs). A probe (each site's default and one candidate: 4 choices, 1.4 s) would have left 1.25
    s, no room for another batch."""
    from tuner.budget.estimate import PRIOR_MARGIN
    from tuner.sweep.site_batches import tune_sites

    assert PRIOR_MARGIN == 2.0
    db, tuning, group, clock, deadline = _known_costs(db_url, monkeypatch, left_s=2.65)
    calls = []
    _, measured, _, _ = tune_sites(tuning, group, _affine(calls, 1.0, 0.1, clock), batch=16)
    assert [n for n, _ in calls][:1] == [6] and calls[0][1] <= deadline
    assert measured == 6
    db.close()


def test_a_batch_cost_line_comes_from_the_prior_then_from_batches_of_two_sizes():
    from tuner.budget.clock import Costs

    costs = Costs(slopes={"k": 0.1})
    assert costs.line("k") is None
    assert costs.line("k", fixed_prior=20.0) == (20.0, 0.1)  # before any batch: a measured compile and the prior
    assert Costs().line("k", fixed_prior=20.0) is None  # no prior share: unknown until measured
    # One batch that took longer than the known compile: that compile, and the rest per choice where that is more
    # than the prior share, else the prior share. The H200's 264-choice batch took 40 s against a 24.5-s compile;
    # the line through it with the prior share (0.13 s) put its compile at 6 s, and a second batch was started that
    # ran 10 s past the phase's deadline. An H100's 136-choice batch (mnasnet1_0) took 30 s against an 18-s
    # compile; its second batch, sized at the 0.09 s a choice beyond the compile, took 50 s for 238 choices (0.13 s
    # beyond it) and ran 14 s past.
    h200 = Costs(slopes={"k": 0.13})
    h200.observe_sized("k", 264, 40.0)
    assert h200.line("k", fixed_prior=24.5) == (24.5, 0.13)
    assert h200.line("k", fixed_prior=50.0)[1] == 0.13  # faster than the compile itself: the prior share
    h100 = Costs(slopes={"k": 0.13})
    h100.observe_sized("k", 136, 30.0)
    assert h100.line("k", fixed_prior=18.0) == (18.0, 0.13)
    slow = Costs(slopes={"k": 0.13})  # gpt2's decode batch on an H100: 40 choices in 28 s against an 18-s compile
    slow.observe_sized("k", 40, 28.0)
    fixed, per = slow.line("k", fixed_prior=18.0)
    assert fixed == 18.0 and abs(per - 0.25) < 1e-9
    costs.observe_sized("k", 40, 6.0)  # one size: the prior's slope through it
    fixed, per = costs.line("k")
    assert per == 0.1 and abs(fixed - 2.0) < 1e-9
    costs.observe_sized("k", 100, 15.0)  # two sizes: the line through them (0.15 s per item, 0 fixed)
    fixed, per = costs.line("k")
    assert abs(per - 0.15) < 1e-9 and abs(fixed) < 1e-9
    assert costs.expect("k") == (6.0 / 40 + 15.0 / 100) / 2  # the mean per item, as before
    # A prior steeper than the work itself is capped: never a negative fixed part.
    steep = Costs(slopes={"k": 1.0})
    steep.observe_sized("k", 10, 2.0)
    assert steep.line("k") == (0.0, 0.2)
    # No prior: through zero, all of it per item.
    plain = Costs()
    plain.observe_sized("k", 10, 2.0)
    assert plain.line("k") == (0.0, 0.2)


def test_a_sites_first_configs_are_measured_without_asking_optuna_and_added_to_its_study_once(db_url):
    """The default and the seeds (the ranked candidates, with a model) are measured straight from the queue and added
    to the study as finished trials (tuner.study.direct): nothing waits in it, each stored trial has one Optuna trial
    with the parameters ``suggest`` gives its config and its ratio, and a rerun measures nothing again."""
    import optuna

    from tuner.keys import config_hash
    from tuner.study.names import study_name
    from tuner.sweep.site_batches import tune_sites

    db, tuning, group = _sites(db_url)
    calls = []
    tune_sites(tuning, group, _slow(calls, 0.001), batch=16)
    for task, rec in group:
        study = optuna.load_study(study_name=study_name(tuning, rec), storage=tuning.storage)
        trials = study.get_trials(deepcopy=False)
        assert not [t for t in trials if t.state == optuna.trial.TrialState.WAITING]
        assert not [t for t in trials if "fixed_params" in t.system_attrs]  # none was enqueued and then asked
        stored = {config_hash(t.config): t for t in db.trials(rec.id, tuning.device_id)}
        by_params = {_canonical(t.params): t for t in trials}
        for h, t in stored.items():
            if t.status != Status.OK.value:
                continue
            twin = [o for p, o in by_params.items() if p == _canonical(task.space.optuna_params(t.config))]
            assert len(twin) == 1 and twin[0].state == optuna.trial.TrialState.COMPLETE
            assert twin[0].value == pytest.approx(t.ratio)
    again = []
    _, measured, _, _ = tune_sites(tuning, group, _slow(again, 0.001), batch=16)
    assert measured == 0 and again == []  # every candidate was slower than its default: nothing to verify either
    db.close()


def _canonical(params):
    return tuple(sorted(params.items()))


def test_a_phase_with_room_for_fewer_sites_than_it_has_measures_those_that_fit(db_url, monkeypatch):
    """A batch costs 1 s of compile plus 0.1 s per choice (0.2 s at the prior's margin) and 1.65 s are left: a batch
    of both sites cannot offer each a candidate besides its default (the H200's resnet50 training sweep: 26 sites, 42
    s, a 39-s compile, no batch and no word); one site can be, with its default (2 choices, 1.4 s at the margin, 1.2 s
    as it runs). The other site is left for a rerun."""
    from tuner.sweep.progress import Progress
    from tuner.sweep.scheduler import tune_site_groups

    db, tuning, group, clock, deadline = _known_costs(db_url, monkeypatch, left_s=1.65)
    calls = []
    outcomes, measured = tune_site_groups(tuning, group, _affine(calls, 1.0, 0.1, clock), 16, 1, Progress())
    assert [n for n, _ in calls] == [2] and calls[0][1] <= deadline and measured == 2
    assert len(outcomes) == 1
    db.close()


@pytest.mark.parametrize("prior, per_choice_s", [(0.1, 0.1), (None, 0.02)])
def test_the_expected_time_of_the_sites_is_what_their_batches_take(db_url, monkeypatch, prior, per_choice_s):
    """Batches cost 1 s of compile (the capture's, as measured) plus a share per choice. Expected before they run, the
    sites' time counts each batch's compile and the verification's, not a choice's prior share alone, and it is what
    the batches then take: with the device's prior share, and without one (a probe first; the compiles alone
    counted, as on the CPU, where a choice's share is small beside a compile)."""
    from tuner.budget.clock import CAPTURE
    from tuner.budget.estimate import SITE_CHOICE
    from tuner.sweep.phases.base import planned
    from tuner.sweep.site_batches import expected_s, site_target, tune_sites

    clock = _SimulatedClock()
    monkeypatch.setattr("tuner.budget.clock.now", clock.now)
    db, tuning, group = _sites(db_url)
    if prior is not None:
        tuning.costs.slopes[SITE_CHOICE] = prior
    tuning.costs.observe(CAPTURE, 1.0)
    targets = [planned(lambda t: site_target(tuning, t), [task]) for task, _ in group]  # capped by each space's size
    expected = expected_s(tuning, targets, batch=2)
    start, calls = clock.t, []
    tune_sites(
        tuning, group, _affine(calls, 1.0, per_choice_s, clock, gain=0.03), batch=2
    )  # finalists 9% faster: verified
    assert len(calls) >= 3 and expected == pytest.approx(clock.t - start, rel=0.1), (expected, calls)
    db.close()


@pytest.mark.parametrize("gain, batches", [(0.2, 2), (0.03, 3)])
def test_a_finalist_clearly_faster_in_its_own_batch_wins_with_no_verification_compile(
    db_url, monkeypatch, gain, batches
):
    """Each site's candidates are 20% faster than the one before: the finalists beat their defaults by more than
    ``UNVERIFIED_GAIN`` in the batch whose compile ran them (Inductor takes a site's fastest choice), so no second
    compile re-times them. Where each is 3% faster (the finalists 9%), the verification compile runs."""
    from tuner.sweep.site_batches import tune_sites

    clock = _SimulatedClock()
    monkeypatch.setattr("tuner.budget.clock.now", clock.now)
    db, tuning, group = _sites(db_url)
    calls = []
    outcomes, _, _, _ = tune_sites(tuning, group, _affine(calls, 1.0, 0.1, clock, gain=gain), batch=2)
    assert len(calls) == batches, calls
    assert all(not o.is_default for o in outcomes)
    assert all(db.winner_config(o.task.id, tuning.device_id) == o.winner for o in outcomes)
    db.close()


def test_a_group_cut_short_before_it_measures_anything_ends_the_phase(db_url, monkeypatch):
    """Batches cost 1 s of compile plus 0.1 s per choice (0.2 s at the prior's margin); 1.9 s are left, room for both
    sites with a candidate each, but opening each site's study takes 0.2 s here, and after that no batch fits. The
    phase then ends; it does not claim the sites again in smaller groups, each opening its studies and verifying
    again while the time runs out (mobilenet_v3_large on the H100: eight rounds in 10 s, nothing measured)."""
    import tuner.sweep.site_batches as site_batches
    from tuner.sweep.progress import Progress
    from tuner.sweep.scheduler import tune_site_groups

    db, tuning, group, clock, deadline = _known_costs(db_url, monkeypatch, left_s=1.9)
    opened = site_batches.open_study

    def slow_to_open(*a, **k):
        clock.t += 0.2
        return opened(*a, **k)

    class Groups(Progress):
        def __init__(self):
            self.said = []

        def task(self, name):
            self.said.append(name)

    monkeypatch.setattr(site_batches, "open_study", slow_to_open)
    calls, progress = [], Groups()
    outcomes, measured = tune_site_groups(tuning, group, _affine(calls, 1.0, 0.1, clock), 16, 1, progress)
    assert progress.said == ["2 template sites"] and calls == [] and measured == 0
    db.close()
