"""Process-wide counters of what compiles under ``backend="tuned"`` did."""

from __future__ import annotations

import threading
from collections import Counter

_lock = threading.Lock()
_counts: Counter[str] = Counter()


def bump(name: str, n: int = 1) -> None:
    with _lock:
        _counts[name] += n


def stats() -> dict[str, int]:
    """``hits`` (winners applied), ``transferred`` (tasks with no exact entry that got the winner of the nearest
    stored task of the same op or graph family at other sizes, ``tuner.nearest``), ``misses`` (Inductor's default
    kept), ``benchmarks`` (autotuning runs),
    ``cached`` (graphs Inductor served from its caches; their hits and misses are those recorded when they were
    compiled, ``backend/cache_stats.py``)."""
    with _lock:
        return {k: _counts[k] for k in ("hits", "transferred", "misses", "benchmarks", "cached")}


def matched_nothing(counts: dict[str, int]) -> bool:
    """Whether lookups counted as in :func:`stats` all missed: the compile ran Inductor's defaults."""
    return bool(counts["misses"]) and not counts["hits"] and not counts["transferred"]


def count(name: str) -> int:
    """Any counter by name (e.g. ``graph_timed``: site choices timed as CUDA-graph replays)."""
    with _lock:
        return _counts[name]


def reset_stats() -> None:
    with _lock:
        _counts.clear()
