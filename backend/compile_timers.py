"""Where a compile's time went, by Dynamo's and Inductor's own timers: the seconds each ``dynamo_timed`` region
took (``torch._dynamo.utils.compilation_time_metrics``: region name -> each call's seconds), e.g.
``mm_template_autotuning``, ``Scheduler.fused_nodes`` or ``benchmark_fused_nodes``.

Regions nest (``GraphLowering.run`` holds the template autotuning it triggers) and a region timed in several threads
at once (``compile_file``) sums their times, so the figures overlap and do not add up to the compile. A torch without
the table logs so once and reports nothing; the compile itself is untouched.
"""

from __future__ import annotations

import logging
from typing import Any

from tuner.once import warn_once

log = logging.getLogger(__name__)
SHOWN_S = 0.05  # regions that took less, in all, are left out of a report


def _table() -> dict[str, list[float]] | None:
    try:
        from torch._dynamo.utils import compilation_time_metrics
    except ImportError:
        compilation_time_metrics = None
    if isinstance(compilation_time_metrics, dict):
        return compilation_time_metrics
    warn_once(log, "torch._dynamo.utils.compilation_time_metrics is missing: no breakdown of compile times")
    return None


def totals() -> dict[str, tuple[float, int]]:
    """Seconds spent so far in this process in each timed region, and how many times it was entered (empty where the
    table is missing)."""
    table = _table() or {}
    return {k: (float(sum(v)), len(v)) for k, v in list(table.items()) if isinstance(v, list)}


def since(before: dict[str, tuple[float, int]]) -> dict[str, Any]:
    """Each region's [seconds, times entered] since ``before`` (a :func:`totals`), largest first, seconds rounded to
    ms (those of at least :data:`SHOWN_S`). How often a region ran tells work done once per site from work done at
    every place a site is met (``mm_template_autotuning`` entered 5 or 40 times)."""
    spent = {k: _delta((s, n), before.get(k, (0.0, 0))) for k, (s, n) in totals().items()}
    ranked = sorted(((k, v) for k, v in spent.items() if v[0] >= SHOWN_S), key=lambda kv: -kv[1][0])
    return {k: [round(s, 3), n] for k, (s, n) in ranked}


def _delta(now: tuple[float, int], then: tuple[float, int]) -> tuple[float, int]:
    """What a region spent between two totals; where it was entered fewer times now, Dynamo's ``reset`` cleared the
    table in between, and all it holds is since."""
    return now if now[1] < then[1] else (now[0] - then[0], now[1] - then[1])


__all__ = ["SHOWN_S", "since", "totals"]
