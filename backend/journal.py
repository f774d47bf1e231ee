"""What each lookup of a compile under ``backend="tuned"`` decided, task by task, for ``tuner explain``.

Nothing is kept unless a caller is recording: the compile path only checks a flag.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

HIT, TRANSFERRED, MISS = "hit", "transferred", "miss"


@dataclass(frozen=True)
class Decision:
    kind: str  # the task kind (``tuner.core.Kind`` value)
    key: str  # the task key this compile looked up
    what: str  # readable: "addmm 16x64,64x128", "forward graph 0", "forward graph 0 fusion"
    outcome: str  # HIT, TRANSFERRED or MISS
    answer: Any  # what was applied: a choice id or a dict of knobs (None for a miss)
    reason: str = ""  # a miss: why there was no answer; a transfer: how far its sizes were
    source: str | None = None  # the stored task a transferred answer came from (its key)


_lock = threading.Lock()
_sinks: list[list[Decision]] = []


@contextlib.contextmanager
def recording() -> Iterator[list[Decision]]:
    """Collect every decision made while this is active (any thread), in order."""
    sink: list[Decision] = []
    with _lock:
        _sinks.append(sink)
    try:
        yield sink
    finally:
        with _lock:
            _sinks.remove(sink)


def note(decision: Decision) -> None:
    if not _sinks:
        return
    with _lock:
        for sink in _sinks:
            sink.append(decision)


__all__ = ["HIT", "MISS", "TRANSFERRED", "Decision", "note", "recording"]
