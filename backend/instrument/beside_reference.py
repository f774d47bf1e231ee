"""Hook (b'') on the CPU: a template site's choices each timed beside a reference, interleaved, when a sweep
benchmarks them (``TUNER_SITE_TIMING`` other than ``launch``).

Inductor's CPU benchmarker times each choice alone, over its own ~100-ms window, one choice after another, so
whatever slows the machine during one window and not another (other work on a small shared machine) lands on one
choice only. Interleaving does not remove what differs between processes, which the whole-workload check still
judges.

Here the first ATen choice the site times (Inductor's default comes first) is the reference: timed alone, its run
function kept. Every later choice is timed in rounds interleaved with it
(``tuner.backend.instrument.timing.interleaved``), and its time is its median over the reference's median in those
rounds, times the reference's own: drift between the choices' timings cancels in each ratio. A template choice cannot be
the reference: Inductor unloads its module once its timing ends. A choice that cannot be run so is timed as Inductor
would, with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tuner.backend import counters, process
from tuner.backend.instrument.site_timing import FALLBACK, run_fn, timed_choice

log = logging.getLogger("tuner.backend")

ROUNDS, SAMPLE_MS = 10, 2.0  # a choice's rounds beside the reference; each sample runs calls for at least this long
COUNTER = "reference_timed"  # site choices timed beside a reference


def medians(fns: dict[str, Callable[[], Any]], rounds: int = ROUNDS) -> dict[str, float]:
    """Each function's median per-call time (ms), the functions timed in interleaved rounds."""
    from tuner.backend.instrument.timing import interleaved

    timed = interleaved({n: (lambda i, f=f: f()) for n, f in fns.items()}, rounds=rounds, min_sample_ms=SAMPLE_MS)
    return {n: t.median_ms for n, t in timed.items()}


class Reference:
    """The site's reference: its run function and its own median, once the first ATen choice was timed."""

    def __init__(self) -> None:
        self.fn: Callable[[], Any] | None = None
        self.ms = 0.0

    def time(self, fn: Callable[[], Any], can_refer: bool) -> float:
        """``fn``'s time (ms): beside the reference where there is one, else alone (it becomes the reference where
        ``can_refer``)."""
        if self.fn is None:
            ms = medians({"this": fn})["this"]
            if can_refer:
                self.fn, self.ms = fn, ms
            return ms
        got = medians({"reference": self.fn, "this": fn})
        return got["this"] / got["reference"] * self.ms


def beside_reference(choices: list[Any]) -> None:
    """Make each of a site's ``choices`` time its runs beside the site's :class:`Reference`, through
    :func:`~tuner.backend.instrument.site_timing.timed_choice` (a choice already so made is left as it is)."""
    reference = Reference()
    for target in (timed_choice(c) for c in choices):
        if getattr(target, "_tuner_beside", False):
            continue
        full = target.benchmark

        def benchmark(*args: Any, out: Any, _full: Callable[..., float] = full, _t: Any = target) -> float:
            try:
                ms = reference.time(run_fn(_t, args, out), can_refer=getattr(_t, "bmreq", None) is None)
            except Exception as e:  # noqa: BLE001 - any failure to run it so: time it as Inductor would
                log.warning(
                    "cannot time %s beside the site's reference (%s: %s); timing it as Inductor does",
                    _t,
                    type(e).__name__,
                    e,
                )
                counters.bump(FALLBACK)
                return float(_full(*args, out=out))
            counters.bump(COUNTER)
            return ms

        process.rebind(target, "benchmark", benchmark)
        process.rebind(target, "_tuner_beside", True)


__all__ = ["COUNTER", "ROUNDS", "Reference", "beside_reference", "medians"]
