"""Sizing work to a deadline: recent costs per kind, and whether the next measurement fits."""

import time

from tuner.budget.clock import Costs, fits


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


def test_the_progress_eta_never_passes_the_promised_end():
    import time

    from rich.progress import Progress

    from tuner.cli.render import BoundedRemaining

    col = BoundedRemaining(time.monotonic() + 30)
    bar = Progress(col)
    tid = bar.add_task("tuning", total=10_000)
    for _ in range(3):
        bar.advance(tid)  # a slow rate: Rich's own estimate would be hours
        time.sleep(0.05)
    h, m, s = (int(v) for v in col.render(bar.tasks[0]).plain.split(":"))
    assert 25 <= 3600 * h + 60 * m + s <= 30
    assert BoundedRemaining(None).render(bar.tasks[0]).plain != "0:00:30"  # no budget: Rich's estimate stands
