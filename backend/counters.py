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
    """``hits`` (winners applied), ``misses`` (Inductor's default kept), ``benchmarks`` (autotuning runs)."""
    with _lock:
        return {"hits": _counts["hits"], "misses": _counts["misses"], "benchmarks": _counts["benchmarks"]}


def count(name: str) -> int:
    """Any counter by name (e.g. ``graph_timed``: site choices timed as CUDA-graph replays)."""
    with _lock:
        return _counts[name]


def reset_stats() -> None:
    with _lock:
        _counts.clear()
