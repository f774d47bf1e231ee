"""The whole-workload check's choice of which kinds of winner to keep, with measurements given as data."""

from tuner.backend.forcing import Forcing
from tuner.measure.result import Measurement, Status
from tuner.workload_check import check_whole

PARTS = {
    "template-site": Forcing(sites={"s": "triton::mm:{}"}),
    "Triton-kernel": Forcing(kernels={"k": {"XBLOCK": 64}}),
    "fusion-grouping": Forcing(),
}


def _measure(times):
    """A measurement per forcing: ``times`` maps the set of kinds kept to the median (the defaults take 1.0)."""
    seen = []

    def measure(f: Forcing) -> Measurement:
        kept = frozenset(n for n, p in PARTS.items() if p != Forcing() and all(getattr(f, a).items() >= getattr(p, a).items() for a in ("sites", "kernels")))
        seen.append(kept)
        return Measurement(Status.OK, times[kept], times[kept], 0.0, 1.0)

    return measure, seen


def test_a_faster_whole_is_kept_after_one_measurement():
    measure, seen = _measure({frozenset({"template-site", "Triton-kernel"}): 0.8})
    m, dropped = check_whole(measure, PARTS, 0.02, lambda s: None)
    assert m.ratio == 0.8 and dropped == [] and len(seen) == 1


def test_the_kind_that_makes_the_whole_slower_is_dropped():
    times = {frozenset({"template-site", "Triton-kernel"}): 1.2, frozenset({"Triton-kernel"}): 0.95, frozenset({"template-site"}): 1.25}
    measure, seen = _measure(times)
    notes = []
    m, dropped = check_whole(measure, PARTS, 0.02, notes.append)
    assert dropped == ["template-site"] and m.ratio == 0.95
    assert len(seen) == 3 and notes  # the whole, then without each non-empty kind (fusion had no winners)


def test_nothing_kept_when_no_single_kind_is_to_blame():
    times = {frozenset({"template-site", "Triton-kernel"}): 1.2, frozenset({"Triton-kernel"}): 1.1, frozenset({"template-site"}): 1.15}
    m, dropped = check_whole(_measure(times)[0], PARTS, 0.02, lambda s: None)
    assert sorted(dropped) == ["Triton-kernel", "template-site"] and m.ratio == 1.0
