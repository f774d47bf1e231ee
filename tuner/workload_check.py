"""The whole-workload check: every winner together against Inductor's defaults, end to end.

Winners are verified one task at a time; together they can still lose (on the H200, vit_b_16's template-site
winners were each faster at their site and made the whole model 1.2x slower). When the whole is slower than
the defaults, the check measures the workload without each kind of winner and keeps the fastest set; the
kinds it drops go back to Inductor's defaults.
"""

from __future__ import annotations

from collections.abc import Callable

from tuner.backend.forcing import FUSION_KIND, GRAPH_KINDS, KERNEL_KINDS, SITE_KIND, Forcing
from tuner.measure.result import Measurement

KINDS = {"template-site": (SITE_KIND,), "Triton-kernel": KERNEL_KINDS, "graph-knob": GRAPH_KINDS, "fusion-grouping": (FUSION_KIND,)}

MeasureForcing = Callable[[Forcing], Measurement]


def union(parts: dict[str, Forcing], skip: str | None = None) -> Forcing:
    out = Forcing()
    for name, f in parts.items():
        if name != skip:
            out = out.merged(f)
    return out


def check_whole(measure: MeasureForcing, parts: dict[str, Forcing], min_gain: float, note: Callable[[str], None]) -> tuple[Measurement, list[str]]:
    """(the measurement of the set kept, the kinds of winner dropped). ``parts``: each kind's forcing."""
    whole = measure(union(parts))
    if not whole.ok or whole.ratio is None or whole.ratio <= 1 + min_gain:
        return whole, []
    note(f"all winners together are {whole.ratio:.2f}x Inductor's time: measuring without each kind of winner")
    best, dropped = whole, []
    for name, f in parts.items():
        if f == Forcing():
            continue
        m = measure(union(parts, skip=name))
        if m.ok and m.ratio is not None and (best.ratio is None or m.ratio < best.ratio):
            best, dropped = m, [name]
    if best.ratio is not None and best.ratio > 1 + min_gain:  # no single kind is to blame: keep Inductor's defaults
        return Measurement(best.status, best.baseline_ms, best.baseline_ms, 0.0, best.baseline_ms), [n for n, f in parts.items() if f != Forcing()]
    return best, dropped
