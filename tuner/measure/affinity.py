"""CPU workers on disjoint cores: ``tuner sweep --workers N --device cpu`` gives each worker its own set of cores
(``os.sched_setaffinity``, inherited by its measuring process and Inductor's compile workers) and a thread count
to match, so no worker times its trials while another compiles or times on the same cores."""

from __future__ import annotations

import os

from tuner.errors import TunerError


def available_cores() -> list[int]:
    """The cores this process may run on."""
    return sorted(os.sched_getaffinity(0))


def core_sets(workers: int, threads: int | None, cores: list[int] | None = None) -> list[list[int]]:
    """``workers`` disjoint sets of ``threads`` cores each (default: the cores split evenly); an error when they
    do not fit the cores this process may use."""
    cores = available_cores() if cores is None else cores
    per = threads or len(cores) // workers
    if per < 1 or workers * per > len(cores):
        raise TunerError(
            f"--workers {workers} with {threads or 'at least 1'} thread(s) each needs {workers * max(per, 1)} cores "
            f"on the CPU; this process may use {len(cores)} ({', '.join(map(str, cores))}). Use fewer workers or --threads."
        )
    return [cores[i * per : (i + 1) * per] for i in range(workers)]


def pin(cores: list[int]) -> None:
    """Run this process (and what it starts from now on) on ``cores`` only."""
    os.sched_setaffinity(0, cores)


def describe(sets: list[list[int]]) -> str:
    shown = ", ".join(
        f"worker {i + 1} on core{'s' if len(c) > 1 else ''} {','.join(map(str, c))}" for i, c in enumerate(sets)
    )
    per = len(sets[0])
    return (
        f"CPU: {shown} ({per} thread{'s' if per > 1 else ''} each; the winners are stored for {per} "
        f"thread{'s' if per > 1 else ''}, so deploy with torch.set_num_threads({per}))"
    )
