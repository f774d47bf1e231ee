"""Compiled bytecode for tuner's own processes where this Python writes none beside its sources.

Where ``PYTHONDONTWRITEBYTECODE`` is set (container images often set it) and no ``PYTHONPYCACHEPREFIX`` is, every
process compiles each module it imports from source, every time. A sweep starts several: its measuring worker (again
after each recycling) and Inductor's compile workers, each importing torch, Dynamo and Inductor, which then take
seconds longer than with their bytecode kept.

:func:`keep` (the command line's first step) then keeps bytecode under tuner's cache folder, never beside the
sources, for this process and every process it starts. :func:`precompile` compiles the packages every measurement
imports there once, on every core, before a sweep or a bench starts, where there are :data:`AHEAD_MIN_CORES`; with
fewer, each module is compiled as it is first imported and kept (a later process reads it).
``TUNER_BYTECODE_CACHE=0`` leaves the interpreter as it is. A user's own process (``backend="tuned"``) is never
changed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
import time
from pathlib import Path

ENV = "PYTHONPYCACHEPREFIX"
PACKAGES = ("torch", "triton", "sympy", "mpmath")  # what every measurement imports: torch, Dynamo, Inductor and theirs
SKIP = re.compile(r"[/\\]testing[/\\]_internal[/\\]")  # torch's own test suite: large, never imported by a compile
# Compiled ahead on this many cores or more, else as imported: on few cores compiling every file ahead costs more than
# the first capture saves.
AHEAD_MIN_CORES = 8
_kept: Path | None = None


def keep(cache_dir: Path, enabled: bool = True, probe: str = "torch") -> Path | None:
    """Keep bytecode under ``cache_dir/bytecode`` where this interpreter writes none, has no prefix and finds none
    beside ``probe``'s sources (an install that compiled them is read as it is): for this process
    (``sys.pycache_prefix``) and those it starts (the environment). The prefix, or None where nothing changed."""
    global _kept
    if not enabled or not sys.dont_write_bytecode or sys.pycache_prefix or os.environ.get(ENV) or not _bare(probe):
        return None
    prefix = cache_dir / "bytecode"
    try:
        prefix.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None  # an unwritable cache folder: the interpreter stays as it was
    sys.pycache_prefix, sys.dont_write_bytecode = str(prefix), False
    os.environ[ENV] = str(prefix)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    _kept = prefix
    return prefix


def _bare(package: str) -> bool:
    """Whether ``package`` is installed with no bytecode beside its sources (where no prefix is set)."""
    dirs = _package_dirs((package,))
    return bool(dirs) and not os.path.exists(importlib.util.cache_from_source(str(dirs[0] / "__init__.py")))


def kept() -> Path | None:
    """The prefix :func:`keep` set in this process, if it set one."""
    return _kept


def _package_dirs(packages: tuple[str, ...]) -> list[Path]:
    """Where the installed ``packages`` live (found without importing them); those not installed are left out."""
    out = []
    for name in packages:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.origin and spec.origin.endswith("__init__.py"):
            out.append(Path(spec.origin).parent)
    return out


def _stamp(prefix: Path, dirs: list[Path]) -> Path:
    """A file that says ``dirs`` were compiled under ``prefix`` by this interpreter, as they are installed now."""
    said = [sys.version, *(f"{d}:{(d / '__init__.py').stat().st_mtime_ns}" for d in dirs)]
    return prefix / f"compiled-{hashlib.sha256(chr(10).join(said).encode()).hexdigest()[:16]}"


def cores() -> int:
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def precompile(prefix: Path, packages: tuple[str, ...] = PACKAGES, workers: int | None = None) -> float | None:
    """Compile ``packages`` into ``prefix`` on ``workers`` processes (every core this process may use), once per
    install: the seconds it took, or None where it was done before (or nothing is installed)."""
    import compileall

    dirs = _package_dirs(packages)
    if not dirs:
        return None
    stamp = _stamp(prefix, dirs)
    if stamp.exists():
        return None
    started = time.monotonic()
    workers = workers or cores()
    for d in dirs:
        compileall.compile_dir(str(d), quiet=2, workers=max(1, workers), rx=SKIP)
    stamp.touch()
    return time.monotonic() - started


__all__ = ["AHEAD_MIN_CORES", "PACKAGES", "cores", "keep", "kept", "precompile"]
