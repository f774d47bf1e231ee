"""The whole-workload check's choice of which winners to keep, with measurements given as data."""

from tuner.core import Forcing, Kind
from tuner.measure.result import Measurement, Status
from tuner.sweep.workload_check import check_whole

PARTS = {
    "template-site": {1: Forcing({Kind.SITE: {"s": "triton::mm:{}"}}), 2: Forcing({Kind.SITE: {"t": "triton::mm:{}"}})},
    "Triton-kernel": {3: Forcing({Kind.TRITON_POINTWISE: {"k": {"XBLOCK": 64}}})},
    "fusion-grouping": {},
}


def _measure(times):
    """A measurement per forcing: ``times`` maps the set of task ids kept to the median (the defaults take 1.0)."""
    seen = []

    def measure(f: Forcing) -> Measurement:
        kept = frozenset(
            tid
            for tasks in PARTS.values()
            for tid, p in tasks.items()
            if all(f.of(k).items() >= p.of(k).items() for k in (Kind.SITE, Kind.TRITON_POINTWISE))
        )
        seen.append(kept)
        return Measurement(Status.OK, times[kept], times[kept], 0.0, 1.0)

    return measure, seen


def test_a_faster_whole_is_kept_after_one_measurement():
    measure, seen = _measure({frozenset({1, 2, 3}): 0.8})
    m, dropped = check_whole(measure, PARTS, 0.02, lambda s: None)
    assert m.ratio == 0.8 and dropped == [] and len(seen) == 1


def test_the_kind_that_makes_the_whole_slower_is_dropped_then_its_good_winners_come_back():
    times = {
        frozenset(
            {1, 2, 3}
        ): 1.2,  # everything; with site 1 kept, adding site 2 back gives this again: it is the harmful one
        frozenset({3}): 0.95,  # without the sites
        frozenset({1, 2}): 1.25,  # without the kernels
        frozenset({1, 3}): 0.90,  # site 1 added back helps the whole
    }
    measure, seen = _measure(times)
    notes = []
    m, dropped = check_whole(measure, PARTS, 0.02, notes.append)
    assert dropped == [2] and m.ratio == 0.90
    # the whole; without each non-empty kind (fusion had no winners); then sites 1 and 2 added back one at a time
    assert seen == [frozenset({1, 2, 3}), frozenset({3}), frozenset({1, 2}), frozenset({1, 3}), frozenset({1, 2, 3})]
    assert len(notes) == 2


def test_an_added_back_winner_must_beat_the_set_by_the_minimum_gain():
    times = {
        frozenset({1, 2, 3}): 1.2,
        frozenset({3}): 0.95,
        frozenset({1, 2}): 1.25,
        frozenset({1, 3}): 0.94,
        frozenset({2, 3}): 0.96,
    }
    m, dropped = check_whole(_measure(times)[0], PARTS, 0.02, lambda s: None)
    assert dropped == [1, 2] and m.ratio == 0.95  # 0.94 is inside the noise of 0.95


def test_nothing_kept_when_no_single_kind_is_to_blame():
    times = {frozenset({1, 2, 3}): 1.2, frozenset({3}): 1.1, frozenset({1, 2}): 1.15}
    m, dropped = check_whole(_measure(times)[0], PARTS, 0.02, lambda s: None)
    assert sorted(dropped) == [1, 2, 3] and m.ratio == 1.0


def test_add_back_isolates_one_harmful_winner_among_many_by_halves():
    from tuner.sweep.workload_check import add_back

    sites = [(i, Forcing({Kind.SITE: {f"s{i}": "triton::mm:{}"}})) for i in range(1, 11)]
    seen = []

    def measure(f: Forcing) -> Measurement:
        kept = {int(k[1:]) for k in f.of(Kind.SITE)}
        seen.append(kept)
        r = 1.0 - 0.03 * len(kept - {7}) + (0.5 if 7 in kept else 0.0)  # every site helps but site 7
        return Measurement(Status.OK, r, r, 0.0, 1.0)

    best, dropped = add_back(measure, Forcing(), Measurement(Status.OK, 1.0, 1.0, 0.0, 1.0), sites, 0.02)
    assert dropped == [7] and best.ratio == 1.0 - 0.03 * 9
    assert len(seen) == 8  # fewer than one measurement per site
    _, capped = add_back(measure, Forcing(), Measurement(Status.OK, 1.0, 1.0, 0.0, 1.0), sites, 0.02, most=2)
    assert capped == [6, 7, 8, 9, 10]  # the first half came back; the rest was not measured, so it stays dropped


def test_no_time_for_a_first_measurement_keeps_every_winner():
    m, dropped = check_whole(lambda f: None, PARTS, 0.02, lambda s: None)
    assert m is None and dropped == []


def test_a_check_cut_by_the_time_budget_decides_on_what_it_measured():
    """Everything measured slower, and no time for more: no single kind was blamed, so Inductor's defaults stay."""
    measure, seen = _measure({frozenset({1, 2, 3}): 1.2})
    calls = []

    def once(f):
        calls.append(f)
        return measure(f) if len(calls) == 1 else None

    m, dropped = check_whole(once, PARTS, 0.02, lambda s: None)
    assert sorted(dropped) == [1, 2, 3] and m.median_ms == m.baseline_ms == 1.0 and len(seen) == 1


def test_a_whole_slower_only_inside_the_measured_noise_keeps_every_winner():
    noisy = Measurement(Status.OK, 1.05, 1.0, 0.2, 1.0, baseline_spread_ms=0.2)  # 5% slower, boxes of +-0.1 ms overlap
    m, dropped = check_whole(lambda f: noisy, PARTS, 0.02, lambda s: None)
    assert m is noisy and dropped == []
    clear = Measurement(Status.OK, 1.05, 1.0, 0.02, 1.0, baseline_spread_ms=0.02)
    seen = []
    check_whole(lambda f: seen.append(f) or clear, PARTS, 0.02, lambda s: None)
    assert len(seen) > 1  # past the noise: the check goes on to find which kind is to blame


def test_the_search_for_winners_to_drop_measures_through_refine():
    """The first measurement is the check's own; finding which winners to drop goes through ``refine``, which the
    sweep makes stop early to keep time for the workload's unfrozen measurement."""
    measure, seen = _measure(
        {
            frozenset({1, 2, 3}): 1.2,
            frozenset({3}): 0.9,
            frozenset({1, 2}): 1.1,
            frozenset({1, 3}): 0.85,
            frozenset({2, 3}): 0.95,
        }
    )
    refined = []
    m, dropped = check_whole(measure, PARTS, 0.02, lambda s: None, refine=lambda f: refined.append(f) or measure(f))
    assert len(seen) == len(refined) + 1 and refined and sorted(dropped) == [2]
    cut, _ = check_whole(measure, PARTS, 0.02, lambda s: None, refine=lambda f: None)
    assert cut.median_ms == cut.baseline_ms  # cut before any refinement: nothing blamed, Inductor's defaults stay


FUSED = {**PARTS, "fusion-grouping": {4: Forcing({Kind.FUSION: {"g": {"space_to_depth": True}}})}}


def _measure_fused(times):
    seen = []

    def measure(f: Forcing) -> Measurement:
        kept = frozenset(
            tid
            for tasks in FUSED.values()
            for tid, p in tasks.items()
            if all(f.of(k).items() >= p.of(k).items() for k in (Kind.SITE, Kind.TRITON_POINTWISE, Kind.FUSION))
        )
        seen.append(kept)
        return Measurement(Status.OK, times[kept], times[kept], 0.0, 1.0)

    return measure, seen


def test_a_whole_slower_than_a_kind_measured_alone_keeps_that_kind_and_adds_back_what_helps():
    times = {
        frozenset({1, 2, 3, 4}): 0.93,  # faster than the defaults, slower than the grouping alone was (0.90)
        frozenset({4}): 0.90,  # the grouping alone, in this run
        frozenset({1, 2, 4}): 0.92,  # the sites added back: slower
        frozenset({1, 4}): 0.91,  # site 1 alone added back: inside the noise of 0.90
        frozenset({2, 4}): 0.93,
        frozenset({3, 4}): 0.85,  # the kernel winner added back helps
    }
    measure, seen = _measure_fused(times)
    notes = []
    m, dropped = check_whole(measure, FUSED, 0.02, notes.append, measured={"fusion-grouping": 0.90})
    assert m.ratio == 0.85 and sorted(dropped) == [1, 2]
    assert seen[:2] == [frozenset({1, 2, 3, 4}), frozenset({4})] and len(notes) == 1


def test_a_whole_as_fast_as_a_kind_measured_alone_is_kept_after_one_measurement():
    measure, seen = _measure_fused({frozenset({1, 2, 3, 4}): 0.91})
    m, dropped = check_whole(measure, FUSED, 0.02, lambda s: None, measured={"fusion-grouping": 0.90})
    assert m.ratio == 0.91 and dropped == [] and len(seen) == 1


def test_a_kind_alone_that_is_not_faster_in_this_run_leaves_every_winner():
    measure, seen = _measure_fused({frozenset({1, 2, 3, 4}): 0.95, frozenset({4}): 0.96})
    m, dropped = check_whole(measure, FUSED, 0.02, lambda s: None, measured={"fusion-grouping": 0.90})
    assert m.ratio == 0.95 and dropped == [] and len(seen) == 2


def test_a_kind_alone_faster_only_inside_the_noise_leaves_every_winner():
    measure, seen = _measure_fused({frozenset({1, 2, 3, 4}): 0.95, frozenset({4}): 0.94})
    m, dropped = check_whole(measure, FUSED, 0.02, lambda s: None, measured={"fusion-grouping": 0.90})
    assert m.ratio == 0.95 and dropped == [] and len(seen) == 2
