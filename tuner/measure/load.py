"""How busy other work keeps this machine's CPUs as a sweep starts. Tuner's own processes keep out of each other's
timings (``tuner.measure.quiet``); anything else on the machine does not, and a CPU sweep timed beside it can decide
wrongly, well outside the spread it measures. The sweep says so at its start; it does not wait.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

BUSY_SHARE = 0.25  # of the machine's cores, busy with other work, above which a CPU sweep warns
_STAT = Path("/proc/stat")


def _jiffies() -> tuple[int, int] | None:
    """(busy, total) CPU time of the whole machine since boot, from /proc/stat (None where there is none)."""
    try:
        fields = [int(v) for v in _STAT.read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = sum(fields[3:5])  # idle and iowait
    return sum(fields) - idle, sum(fields)


def busy_cores(window_s: float = 0.4) -> float | None:
    """How many cores were busy, in all, over the next ``window_s`` while this process sleeps (None where the
    machine does not say)."""
    before = _jiffies()
    time.sleep(window_s)
    after = _jiffies()
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1]) * (os.cpu_count() or 1)


def busy_note(device: str) -> str | None:
    """A line for a CPU sweep's start where other work keeps more than :data:`BUSY_SHARE` of the cores busy."""
    if device != "cpu":
        return None
    busy, cores = busy_cores(), os.cpu_count() or 1
    if busy is None or busy <= BUSY_SHARE * cores:
        return None
    return (
        f"other work keeps ~{busy:.1f} of this machine's {cores} cores busy: timings taken beside it can be off by "
        "more than their spread, enough to decide wrongly; sweep on a quiet machine"
    )


def others_note(device: str) -> str | None:
    """A line for a sweep's start where another tuner process holds this device's measurement lock: the sweep's
    timings wait for its windows (``tuner.measure.quiet``), so the two never time together; else where other work
    keeps the CPUs busy (:func:`busy_note`); else None."""
    from tuner.measure import quiet

    pid = quiet.holder(quiet.device_lock(device))  # the first GPU: a worker's own index is known only inside it
    if pid is not None:
        return (
            f"another tuner process (pid {pid or 'unknown'}) is measuring on this {device}: this sweep's timings wait "
            "for its measurement windows, so that no two time together"
        )
    return busy_note(device)  # other work, which no lock keeps out


__all__ = ["BUSY_SHARE", "busy_cores", "busy_note", "others_note"]
