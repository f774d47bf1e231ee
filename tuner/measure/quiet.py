"""Quiet timing windows on the CPU (issue 17): while one sweep process times, no process of a sweep on this machine
compiles or times. Compiles take a shared lock, timing an exclusive one (``fcntl.flock`` on one file in the
cache folder), so several workers still compile side by side, and each timing window waits for the compiles in
flight to end and keeps new ones out until it closes. Workers already run on disjoint cores (``tuner.affinity``);
this also keeps a compile's memory traffic on the other cores out of a measurement. CUDA timing is left alone: a
GPU is a worker's own."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

_holding: set[str] = set()  # the lock this process holds now: nested use leaves the outermost lock in charge


def lock_path(name: str = "cpu-measure") -> Path:
    from tuner.settings import settings

    return settings().cache_dir / f"{name}.lock"


def _open(name: str) -> int:
    path = lock_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)


@contextlib.contextmanager
def _locked(mode: int, name: str, enabled: bool) -> Iterator[None]:
    """The shared lock (compiles) or the exclusive one (timing), taken through a turnstile: a timing window that
    waits holds the turnstile, so compiles that start after it queue behind it instead of keeping the shared lock
    held for ever (flock alone lets back-to-back shared holders starve an exclusive one)."""
    if not enabled or _holding:
        yield
        return
    gate, fd = _open("cpu-measure-gate"), _open("cpu-measure")
    try:
        fcntl.flock(gate, fcntl.LOCK_EX if mode == fcntl.LOCK_EX else fcntl.LOCK_SH)
        fcntl.flock(fd, mode)
        fcntl.flock(gate, fcntl.LOCK_UN)
        _holding.add(name)
        yield
    finally:
        _holding.discard(name)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        os.close(gate)


def compiling(enabled: bool = True) -> contextlib.AbstractContextManager[None]:
    """Around a compile that times nothing: other compiles may run beside it, no timing may."""
    return _locked(fcntl.LOCK_SH, "compile", enabled)


def timing(enabled: bool = True) -> contextlib.AbstractContextManager[None]:
    """Around a measurement (or a compile that benchmarks choices): nothing else of the sweep runs meanwhile."""
    return _locked(fcntl.LOCK_EX, "timing", enabled)
