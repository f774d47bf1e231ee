"""A CPU sweep says so at its start where other work keeps the machine's cores busy: its timings could decide wrongly
beside it (``tuner.measure.load``)."""

import subprocess
import sys
import time

from tuner.measure import load


def test_a_process_spinning_beside_the_sweep_is_seen_and_said(monkeypatch):
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        assert load.busy_cores() >= 0.7  # one core of the spinning process, whatever else runs
        monkeypatch.setattr(load, "BUSY_SHARE", 0.6 / (load.os.cpu_count() or 1))  # any machine: one busy core is over
        said = load.others_note("cpu")
        assert "cores busy" in said and "quiet machine" in said
        assert load.others_note("cuda") is None  # a GPU's timings are the device's: no CPU check
    finally:
        spin.kill()
        spin.wait()


def test_a_machine_that_does_not_say_gives_no_figure(monkeypatch, tmp_path):
    monkeypatch.setattr(load, "_STAT", tmp_path / "absent")
    assert load.busy_cores(0.01) is None and load.busy_note("cpu") is None
