"""Early exit: the one rule that stops timing a candidate after a short probe, for template-site choices
(``hooks.site_timing.prune_slow``) and Triton kernel configs (``tuner.measure.kernels``) alike.

A candidate is stopped when its probe is at least ``PRUNE_FACTOR`` times the best time known for its task *and*
slower than it by more than a margin: the caller's floor (what its probe's own overhead can add) or the probe's
measured noise, whichever is larger. Such a candidate can never win; it is stored as ``pruned`` with its probe
time and never measured again.
"""

from __future__ import annotations

PRUNE_FACTOR = 1.5
NOISE_MARGIN = 3.0  # the margin, in interquartile ranges of the probe's own runs
PRUNED_NOTE = "stopped after its probe: clearly slower than the best timed"


def clearly_slower(probe_ms: float, best_ms: float | None, floor_ms: float, noise_ms: float = 0.0) -> bool:
    if best_ms is None or not best_ms > 0 or not probe_ms > 0:
        return False
    margin = max(floor_ms, NOISE_MARGIN * noise_ms) if noise_ms > 0 else floor_ms
    return probe_ms >= PRUNE_FACTOR * best_ms and probe_ms - best_ms >= margin
