"""Quiet timing windows per device: while one tuner process times on a device, no other tuner process on this machine
times on it, whatever its database or cache folder, and on the CPU none compiles either. Compiles take a shared lock,
timing an exclusive one (``fcntl.flock`` on one file per device in a machine-wide folder, ``TUNER_LOCK_DIR``), so
several workers still compile side by side, and each timing window waits for the compiles in flight to end and keeps
new ones out until it closes. Workers already run on disjoint cores (``tuner.measure.affinity``); this also keeps a
compile's memory traffic, and a second sweep started beside the first, out of a measurement. A window that has to wait
says so
(the worker's log), and a sweep that starts while another process holds its device's lock says so on screen
(:func:`holder`)."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger("tuner.measure")
_holding: set[str] = set()  # the lock this process holds now: nested use leaves the outermost lock in charge


def device_lock(device_type: str, index: int = 0) -> str:
    """The name of a device's measurement lock: ``cpu``, or ``cuda<index>`` per GPU."""
    return "cpu" if device_type == "cpu" else f"{device_type}{index}"


def lock_path(name: str = "cpu-measure") -> Path:
    from tuner.settings import settings

    return settings().lock_dir / f"{name}.lock"


def _open(name: str) -> int:
    path = lock_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):  # shared by every user's tuner on the machine
        path.parent.chmod(0o1777)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o666)
    return fd


def _take(fd: int, mode: int, device: str) -> None:
    """``flock`` ``fd``; where another process holds it, one line in this process's log, then wait."""
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    t0 = time.monotonic()
    log.warning(
        "another tuner process is measuring on %s (pid %s): waiting for it, so that no two time together",
        device,
        _owner(device) or "unknown",
    )
    fcntl.flock(fd, mode)
    log.warning("waited %.1f s for the %s measurement lock", time.monotonic() - t0, device)


def _owner_path(device: str) -> Path:
    return lock_path(f"{device}-measure").with_suffix(".owner")


def _owner(device: str) -> int | None:
    try:
        return int(_owner_path(device).read_text().strip() or 0) or None
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def _locked(mode: int, name: str, enabled: bool, device: str) -> Iterator[None]:
    """The shared lock (compiles) or the exclusive one (timing), taken through a turnstile: a timing window that
    waits holds the turnstile, so compiles that start after it queue behind it instead of keeping the shared lock
    held for ever (flock alone lets back-to-back shared holders starve an exclusive one)."""
    if not enabled or _holding:
        yield
        return
    gate, fd = _open(f"{device}-measure-gate"), _open(f"{device}-measure")
    try:
        _take(gate, fcntl.LOCK_EX if mode == fcntl.LOCK_EX else fcntl.LOCK_SH, device)
        _take(fd, mode, device)
        fcntl.flock(gate, fcntl.LOCK_UN)
        if mode == fcntl.LOCK_EX:
            with contextlib.suppress(OSError):
                _owner_path(device).write_text(str(os.getpid()))
        _holding.add(name)
        yield
    finally:
        _holding.discard(name)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        os.close(gate)


def compiling(enabled: bool = True, device: str = "cpu") -> contextlib.AbstractContextManager[None]:
    """Around a compile that times nothing: other compiles may run beside it, no timing may."""
    return _locked(fcntl.LOCK_SH, "compile", enabled, device)


def timing(enabled: bool = True, device: str = "cpu") -> contextlib.AbstractContextManager[None]:
    """Around a measurement (or a compile that benchmarks choices): nothing else measures on ``device`` meanwhile."""
    return _locked(fcntl.LOCK_EX, "timing", enabled, device)


def holder(device: str = "cpu") -> int | None:
    """The pid of another process that holds ``device``'s measurement lock now (0 when it cannot be told); None
    when it is free."""
    fd = _open(f"{device}-measure")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return _owner(device) or 0
    finally:
        os.close(fd)  # closing releases a lock it took
    return None
