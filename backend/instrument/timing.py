"""Interleaved timing of candidates in one process: warm-up, calibrated samples, A B / B A rounds, medians.

Every sample runs in a frame-stack chunk of its own (:func:`roomy`). CPython (3.11 onwards) keeps Python frames in
16-KiB chunks: it maps a new chunk when a frame does not fit the current one and unmaps it when that frame returns. A
step whose frames straddle a chunk boundary therefore maps and unmaps a chunk on every call of the helper that crosses
it (a syscall pair, page faults and, with OpenMP threads in the process, TLB shootdowns). Where the boundary falls
depends only on how deep the caller's stack is, so a timing taken at some depth charges a candidate for how the
program was started: ``python -m tuner bench`` (three runpy frames deeper than the console script) timed Inductor's
default 1.8-2.4x slower on shufflenet_v2_x1_0 on a 2-core CPU, with ~4,700 16-KiB mmap/munmap pairs a second from
``_PyThreadState_BumpFramePointerSlow``. A sample started under a 128-KiB frame runs in a fresh 256-KiB chunk with
~128 KiB of room above it: no boundary on the step's path, whatever the launcher.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


_ROOMY_LOCALS = 16384  # 8 bytes each: a 128-KiB frame, which CPython gives a 256-KiB chunk of its own


def _make_roomy() -> Callable[[Callable[[], object]], object]:
    names = " = ".join(f"_{i}" for i in range(_ROOMY_LOCALS))  # never assigned: they only size the frame
    src = f"def roomy(fn):\n    if fn is None:\n        {names} = None\n    return fn()\n"
    namespace: dict[str, object] = {}
    exec(
        compile(src, "<tuner.backend.instrument.timing roomy>", "exec"), namespace
    )  # our own source, nothing read from outside
    return namespace["roomy"]  # type: ignore[return-value]


roomy = _make_roomy()
roomy.__doc__ = "``fn()`` in a frame-stack chunk with ~128 KiB of room: no chunk is mapped or unmapped on its path."


@dataclass(frozen=True)
class Timing:
    median_ms: float
    min_ms: float
    spread_ms: float  # interquartile range of the per-call samples
    samples: int


def _summary(samples: list[float]) -> Timing:
    qs = statistics.quantiles(samples, n=4) if len(samples) >= 2 else [samples[0]] * 3
    return Timing(statistics.median(samples), min(samples), qs[2] - qs[0], len(samples))


def interleaved(
    fns: dict[str, Callable[[int], object]],
    *,
    rounds: int,
    min_sample_ms: float,
    sync: Callable[[], None] = lambda: None,
    warmup: int = 3,
) -> dict[str, Timing]:
    """Per-call times of each ``fn(i)`` (``i`` rotates inputs). Each sample runs enough calls to last
    ``min_sample_ms``, inside :func:`roomy`; rounds alternate the order so drift and caches favour no one."""
    names = list(fns)
    calls: dict[str, int] = {}
    for name in names:
        one = roomy(lambda: _warmed(fns[name], warmup, sync))
        calls[name] = max(1, math.ceil(min_sample_ms / one))  # type: ignore[operator]
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            samples[name].append(roomy(lambda: _sample(fns[name], calls[name], sync)))  # type: ignore[arg-type]
    return {n: _summary(s) for n, s in samples.items()}


def _warmed(fn: Callable[[int], object], warmup: int, sync: Callable[[], None]) -> float:
    """``warmup`` calls of ``fn``, then the time of one more, in ms (at least 1 µs)."""
    for i in range(warmup):
        fn(i)
    return max(_sample(fn, 1, sync, start=warmup), 1e-3)


def _sample(fn: Callable[[int], object], n: int, sync: Callable[[], None], start: int = 0) -> float:
    """The mean time of ``n`` calls of ``fn``, in ms."""
    sync()
    t0 = time.perf_counter()
    for i in range(start, start + n):
        fn(i)
    sync()
    return (time.perf_counter() - t0) * 1e3 / n


def pooled(timings: list[Timing]) -> Timing:
    """One timing from those of several compiled instances of one config: the median of their medians, their least
    time, the median of their spreads or, where wider, the spread between their medians."""
    medians = [t.median_ms for t in timings]
    spread = max(statistics.median(t.spread_ms for t in timings), max(medians) - min(medians))
    return Timing(statistics.median(medians), min(t.min_ms for t in timings), spread, sum(t.samples for t in timings))
