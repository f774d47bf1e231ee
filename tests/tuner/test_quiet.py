"""Quiet CPU timing windows: real processes and a real flock. Compiles run beside each other; a timing window
runs alone, after the compiles in flight and before the next ones."""

import multiprocessing as mp
import time


def _hold(kind, cache_dir, seconds, started, out):
    import os

    os.environ["TUNER_LOCK_DIR"] = cache_dir
    os.environ["TUNER_CACHE_DIR"] = os.path.join(
        cache_dir, f"cache-{os.getpid()}"
    )  # its own cache folder, as any user's
    from tuner.measure import quiet

    with getattr(quiet, kind)():
        started.set()
        t0 = time.monotonic()
        time.sleep(seconds)
        out.put((kind, t0, time.monotonic()))


def _run(first, second, tmp_path):
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    a_in, b_in = ctx.Event(), ctx.Event()
    a = ctx.Process(target=_hold, args=(first, str(tmp_path), 1.5, a_in, out))
    a.start()
    assert a_in.wait(60)
    b = ctx.Process(target=_hold, args=(second, str(tmp_path), 0.2, b_in, out))
    b.start()
    got = sorted([out.get(timeout=60), out.get(timeout=60)], key=lambda r: r[1])
    a.join(30)
    b.join(30)
    return got


def test_a_compile_waits_for_a_timing_window_to_close(tmp_path):
    (k1, _, end1), (k2, start2, _) = _run("timing", "compiling", tmp_path)
    assert (k1, k2) == ("timing", "compiling") and start2 >= end1


def test_a_timing_window_waits_for_the_compile_in_flight(tmp_path):
    (k1, _, end1), (k2, start2, _) = _run("compiling", "timing", tmp_path)
    assert (k1, k2) == ("compiling", "timing") and start2 >= end1


def test_compiles_run_side_by_side(tmp_path):
    (_, _, end1), (_, start2, _) = _run("compiling", "compiling", tmp_path)
    assert start2 < end1  # the second began while the first still held its shared lock


def test_a_window_not_enabled_takes_no_lock(tmp_path, monkeypatch):
    from tuner.measure import quiet
    from tuner.settings import settings

    monkeypatch.setenv("TUNER_LOCK_DIR", str(tmp_path / "nope"))
    settings.cache_clear()
    with quiet.timing(enabled=False):
        pass
    assert not (tmp_path / "nope").exists()


def test_a_window_that_waits_says_so_and_whose_lock_it_is(tmp_path, monkeypatch, caplog):
    """Two tuner processes with their own cache folders and databases still share one lock per device."""
    import logging

    from tuner.measure import quiet
    from tuner.settings import settings

    monkeypatch.setenv("TUNER_LOCK_DIR", str(tmp_path))
    settings.cache_clear()
    ctx = mp.get_context("spawn")
    out, held = ctx.Queue(), ctx.Event()
    other = ctx.Process(target=_hold, args=("timing", str(tmp_path), 1.5, held, out))
    other.start()
    assert held.wait(60)
    assert quiet.holder("cpu") == other.pid and quiet.holder("cuda0") is None
    with caplog.at_level(logging.WARNING, logger="tuner"):
        with quiet.timing():
            t0 = time.monotonic()
    _, _, their_end = out.get(timeout=60)
    other.join(30)
    assert t0 >= their_end
    said = " ".join(r.getMessage() for r in caplog.records)
    assert f"another tuner process is measuring on cpu (pid {other.pid})" in said and "waited" in said
    assert quiet.holder("cpu") is None


def _compile_in_turns(cache_dir, until, started):
    """Back-to-back compiles that overlap: the shared lock is never free while two of these run."""
    import os

    os.environ["TUNER_LOCK_DIR"] = cache_dir
    from tuner.measure import quiet

    started.set()
    while time.monotonic() < until:
        with quiet.compiling():
            time.sleep(0.3)


def test_back_to_back_compiles_do_not_starve_a_timing_window(tmp_path):
    ctx = mp.get_context("spawn")
    until = time.monotonic() + 20
    events = [ctx.Event(), ctx.Event()]
    compilers = []
    for i, ev in enumerate(events):
        p = ctx.Process(target=_compile_in_turns, args=(str(tmp_path), until, ev))
        p.start()
        compilers.append(p)
        assert ev.wait(60)
        time.sleep(0.15)  # staggered, so one of them always holds the shared lock
    time.sleep(1.0)
    out, in_ = ctx.Queue(), ctx.Event()
    t0 = time.monotonic()
    timer = ctx.Process(target=_hold, args=("timing", str(tmp_path), 0.1, in_, out))
    timer.start()
    _, started, _ = out.get(timeout=30)
    assert started - t0 < 5.0  # it got its window while the compiles were still going (they run until t0 + ~18 s)
    timer.join(30)
    for p in compilers:
        p.join(60)
