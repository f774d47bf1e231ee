"""On the CPU a site's choices are each timed beside the site's first ATen choice, interleaved, so that the
machine's drift between their timings cancels (``backend/instrument/beside_reference.py``)."""

import math
import time

import pytest

from tuner.backend import counters
from tuner.backend.instrument.beside_reference import COUNTER, Reference
from tuner.backend.instrument.context import MeasuringContext
from tuner.core import Forcing

SLOW = [1.0]  # how slow the machine runs now: every spin takes this many times its own time


def _spin(ms: float):
    def run():
        end = time.perf_counter() + ms * SLOW[0] / 1e3
        while time.perf_counter() < end:
            pass

    return run


def test_a_choice_timed_while_the_machine_runs_slow_keeps_its_time_against_the_reference():
    SLOW[0] = 1.0
    reference = Reference()
    assert reference.time(_spin(0.5), can_refer=True) == pytest.approx(0.5, rel=0.3)
    SLOW[0] = 3.0  # the machine slows threefold before the next choice is timed, as on a shared 2-core host
    try:
        assert reference.time(_spin(1.0), can_refer=False) == pytest.approx(1.0, rel=0.3)  # alone it would time ~3.0
    finally:
        SLOW[0] = 1.0


def test_a_template_choice_is_no_reference():
    """Inductor unloads a template choice's module once its timing ends: only an ATen call can be run again."""
    reference = Reference()
    reference.time(_spin(0.3), can_refer=False)
    assert reference.fn is None
    reference.time(_spin(0.3), can_refer=True)
    assert reference.fn is not None


@pytest.mark.parametrize(
    "device, timing, rounds, expect",
    [
        ("cpu", "pipelined", {"k": ("a", "b")}, True),  # the sweep's default on the CPU ("auto")
        ("cpu", "launch", {"k": ("a", "b")}, False),  # Inductor's own timing
        ("cpu", "pipelined", None, False),  # a compile that benchmarks nothing
        ("cuda", "pipelined", {"k": ("a", "b")}, False),  # CUDA's own ways (site_timing.py)
    ],
)
def test_only_benchmarked_cpu_sites_are_timed_beside_a_reference(device, timing, rounds, expect):
    assert MeasuringContext(Forcing(), device, benchmark=rounds, site_timing=timing).times_beside_reference is expect


def test_a_real_cpu_site_times_every_choice_beside_its_aten_default():
    """A real site round: ATen's linear and the CPP GEMM template behind its input-preparing wrapper, each timed
    beside the default, none falling back to Inductor's timing."""
    from tuner.measure.jobs import SiteBatch
    from tuner.measure.result import Status
    from tuner.measure.session import Session
    from tuner.workloads.spec import WorkloadSpec

    session = Session(WorkloadSpec(model="tests.helpers.models:mlp", device="cpu", input_shape=(16, 64), threads=2))
    site = next(s for s in session.capture().sites if len(s["choices"]) >= 2)
    choices = tuple(dict.fromkeys([site["default"], *site["choices"]]))[:3]
    assert site["default"].startswith("aten")
    before = counters.count(COUNTER)
    r = session.run(SiteBatch({}, {site["key"]: choices}))
    assert r.status is Status.OK and r.fallbacks == 0, r.error
    t = r.timings[site["key"]]
    assert all(c in t and math.isfinite(t[c]) and t[c] > 0 for c in choices), t
    assert counters.count(COUNTER) - before == len(choices)
