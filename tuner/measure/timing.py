"""Interleaved timing of candidates in one process: warm-up, calibrated samples, A B / B A rounds, medians."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


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
    ``min_sample_ms``; rounds alternate the order so drift and caches favour no one."""
    names = list(fns)
    calls: dict[str, int] = {}
    for name in names:
        for i in range(warmup):
            fns[name](i)
        sync()
        t0 = time.perf_counter()
        fns[name](warmup)
        sync()
        one = max((time.perf_counter() - t0) * 1e3, 1e-3)
        calls[name] = max(1, math.ceil(min_sample_ms / one))
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            fn, n = fns[name], calls[name]
            sync()
            t0 = time.perf_counter()
            for i in range(n):
                fn(i)
            sync()
            samples[name].append((time.perf_counter() - t0) * 1e3 / n)
    return {n: _summary(s) for n, s in samples.items()}
