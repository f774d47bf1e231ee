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
CLOSING_S = 5.0  # what the end of a sweep cut short takes: the worker's exit, the closing writes and tables


_command_started: float | None = None  # set by the console script's entry point (``tuner.cli.main``)


def command_started() -> float:
    """When the running command started: the process's start where ``tuner`` was run as a program, else now (the
    command invoked from Python, where the process's age is not the command's)."""
    return _command_started if _command_started is not None else time.monotonic()


def mark_process_as_command() -> None:
    """Called by the console script: this process is the command, so its time counts from the process's start."""
    global _command_started
    _command_started = process_started()


def process_started() -> float:
    """When this process started, on ``time.monotonic()``'s clock: a time budget counts from the command's start, the
    interpreter's imports included (cold, a new environment's first imports take seconds). Where /proc cannot say,
    now."""
    import os

    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: start time in clock ticks after boot
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        age = uptime - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.monotonic()
    return time.monotonic() - max(0.0, age)


@dataclass
class Costs:
    """Seconds the latest measurements of each kind took ({kind: seconds}, the newest last)."""

    seen: dict[str, list[float]] = field(default_factory=dict)
    sized: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # {kind: [(items, seconds)]}
    slopes: dict[str, float] = field(default_factory=dict)  # {kind: prior seconds per item} (see line)

    def observe(self, kind: str, seconds: float) -> None:
        self.seen.setdefault(kind, []).append(seconds)
        del self.seen[kind][:-RECENT]

    def observe_sized(self, kind: str, items: int, seconds: float) -> None:
        """Work of ``kind`` that took ``seconds`` for ``items`` items: kept for :meth:`line`, and its mean per item
        for :meth:`expect`."""
        self.sized.setdefault(kind, []).append((items, seconds))
        del self.sized[kind][:-RECENT]
        self.observe(kind, seconds / max(1, items))

    def line(self, kind: str, fixed_prior: float | None = None) -> tuple[float, float] | None:
        """(fixed seconds, seconds per item) of work of ``kind`` whose cost grows with its size (a site batch: a
        compile, then its choices), from the recent ones. Sizes that differ give the line through them (least
        squares); one size alone, ``fixed_prior`` (e.g. a compile's measured cost) where it took longer than that,
        with the rest per item but never less than the prior slope of ``slopes``, else the line through it with the
        prior slope (none: through zero, all of it per item). Before the first: ``fixed_prior`` with the prior
        slope, where both are known; else None. Neither part is ever negative.

        One size cannot tell a batch's compile from its items, and the next batch is sized on the split: taking the
        measured compile alone, or the line through the batch with the prior slope alone, each sized a second batch
        that ran past its deadline. So the larger of both parts is taken."""
        per_item_prior = self.slopes.get(kind)
        seen = self.sized.get(kind)
        if not seen:
            return (fixed_prior, per_item_prior) if fixed_prior and per_item_prior is not None else None
        n = [float(i) for i, _ in seen]
        t = [s for _, s in seen]
        mean_n, mean_t = statistics.fmean(n), statistics.fmean(t)
        all_per_item = mean_t / max(1.0, mean_n)
        spread = sum((x - mean_n) ** 2 for x in n)
        if spread > 0 and spread >= 0.1 * mean_n**2 * len(n):  # sizes at least ~30% apart: the data decide the slope
            slope = sum((x - mean_n) * (y - mean_t) for x, y in zip(n, t)) / spread
        elif fixed_prior and mean_t > fixed_prior:  # the known compile, the rest per item, at least the prior's
            return fixed_prior, max((mean_t - fixed_prior) / max(1.0, mean_n), per_item_prior or 0.0)
        else:
            slope = per_item_prior if per_item_prior is not None else all_per_item
        slope = min(max(slope, 0.0), all_per_item)  # between nothing and everything per item
        return max(0.0, mean_t - slope * mean_n), slope

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


# The share of a time budget the capture may have spent when it times compiled instances of its config (CPU): past it,
# two more compiles and their timing would leave a short budget's searches no time.
INSTANCES_SHARE = 0.5


def with_instances(timing_s: float, compile_s: float, instances: int) -> float:
    """What timing both sides of a whole-workload trial costs with ``instances`` of each: the timing for each instance,
    and a later compile (``compile_s``) of each side for each instance beyond the held one."""
    return instances * timing_s + 2 * (instances - 1) * compile_s


def instances_by(budget_s: float | None, t0: float) -> float | None:
    """When the capture's instance compiles must end (``Session.instances_by``); None without a time budget."""
    return None if budget_s is None else t0 + INSTANCES_SHARE * budget_s


__all__ = ["CAPTURE", "CLOSING_S", "Costs", "fits", "instances_by", "now", "with_instances"]
