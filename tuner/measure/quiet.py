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

_held: dict[str, int] = {}  # nested use in one process: the outermost lock rules


def lock_path() -> Path:
    from tuner.settings import settings

    return settings().cache_dir / "cpu-measure.lock"


@contextlib.contextmanager
def _locked(mode: int, name: str, enabled: bool) -> Iterator[None]:
    if not enabled or _held:
        yield
        return
    path = lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, mode)
        _held[name] = fd
        yield
    finally:
        _held.pop(name, None)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def compiling(enabled: bool = True) -> contextlib.AbstractContextManager[None]:
    """Around a compile that times nothing: other compiles may run beside it, no timing may."""
    return _locked(fcntl.LOCK_SH, "compile", enabled)


def timing(enabled: bool = True) -> contextlib.AbstractContextManager[None]:
    """Around a measurement (or a compile that benchmarks choices): nothing else of the sweep runs meanwhile."""
    return _locked(fcntl.LOCK_EX, "timing", enabled)
