"""Time budgets as promises: what each kind of measurement has cost lately, and whether the next one fits before a
deadline. Work that would end past its deadline is not started (it stays resumable); the first measurement of a
kind, whose cost is not known yet, is started while any time is left."""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

RECENT = 5  # the estimate is the median of this many latest measurements of a kind
CAPTURE = "capture"  # the cost kind of a compile of the whole workload (the capture's first, then the others)


@dataclass
class Costs:
    """Seconds the latest measurements of each kind took ({kind: seconds}, the newest last)."""

    seen: dict[str, list[float]] = field(default_factory=dict)

    def observe(self, kind: str, seconds: float) -> None:
        self.seen.setdefault(kind, []).append(seconds)
        del self.seen[kind][:-RECENT]

    def expect(self, kind: str, fallback: str | None = None, scale: float = 1.0) -> float:
        """The median of the recent ones of ``kind``; else ``scale`` times ``fallback``'s; else 0 (unknown)."""
        if self.seen.get(kind):
            return statistics.median(self.seen[kind])
        if fallback is not None and self.seen.get(fallback):
            return scale * statistics.median(self.seen[fallback])
        return 0.0

    @contextlib.contextmanager
    def timed(self, kind: str) -> Iterator[None]:
        t0 = now()
        try:
            yield
        finally:
            self.observe(kind, now() - t0)


def now() -> float:
    """The clock every deadline is read against (``time.monotonic``; tests replace it with a simulated one)."""
    return time.monotonic()


def fits(deadline: float | None, seconds: float) -> bool:
    """Whether work expected to take ``seconds`` ends by ``deadline`` (None: no deadline). Unknown work (0 s) fits
    while the deadline has not passed."""
    if deadline is None:
        return True
    t = now()
    return t + seconds <= deadline if seconds else t < deadline


__all__ = ["CAPTURE", "Costs", "fits", "now"]
