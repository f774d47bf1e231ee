"""Sizing work to a deadline: recent costs per kind, and whether the next measurement fits."""

import time

from tuner.clock import Costs, fits


def test_the_estimate_is_the_median_of_recent_costs_or_a_scaled_fallback():
    c = Costs()
    assert c.expect("graph") == 0.0  # unknown
    for s in (1.0, 9.0, 2.0, 3.0, 2.5, 100.0, 2.0):
        c.observe("graph", s)
    assert c.seen["graph"] == [2.0, 3.0, 2.5, 100.0, 2.0]  # only the latest few count
    assert c.expect("graph") == 2.5
    assert c.expect("graph:verify", fallback="graph", scale=2.0) == 5.0
    with c.timed("site"):
        time.sleep(0.01)
    assert 0.005 < c.expect("site") < 1.0


def test_work_fits_only_when_it_ends_before_the_deadline():
    now = time.monotonic()
    assert fits(None, 1e9)
    assert fits(now + 10, 5.0) and not fits(now + 10, 20.0)
    assert fits(now + 10, 0.0) and not fits(now - 1, 0.0)  # unknown work starts while any time is left
