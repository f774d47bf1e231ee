"""The whole-workload check: every winner together against the workload without them (Inductor's defaults, under CUDA
graphs where the sweep keeps them), end to end.

Winners are verified one task at a time; together they can still lose (winners each faster at their own site can make
the whole model slower). When the whole is slower than
the defaults, the check measures the workload without each kind of winner and keeps the fastest set. Then it
adds the dropped kind's winners back by halves (group testing) and keeps each group that makes the whole faster,
so one harmful winner does not cost the good ones of its kind. Dropped winners go back to Inductor's defaults.

A whole faster than the defaults can still be slower than one kind's winners alone, where the sweep measured those
over the whole workload (a fusion grouping, beside its base). Then that kind is measured alone in the same run, and
the other winners are added back to it by halves.
"""

from __future__ import annotations

from collections.abc import Callable

from tuner.core import Forcing
from tuner.measure.result import Measurement

REFINE_MEASUREMENTS = 12  # at most this many whole-workload measurements to add a dropped kind's winners back

MeasureForcing = Callable[[Forcing], Measurement | None]  # None: no time was left to measure
Parts = dict[str, dict[int, Forcing]]  # kind of winner → {task id: what that task's winner forces}


def _kinds(parts: Parts, skip: str | None = None) -> Forcing:
    return Forcing.union(f for name, tasks in parts.items() if name != skip for f in tasks.values())


def _better(m: Measurement, than: Measurement, by: float = 0.0) -> bool:
    return m.ok and m.ratio is not None and (than.ratio is None or m.ratio < than.ratio * (1 - by))


def check_whole(
    measure: MeasureForcing,
    parts: Parts,
    min_gain: float,
    note: Callable[[str], None],
    refine: MeasureForcing | None = None,
    measured: dict[str, float] | None = None,
) -> tuple[Measurement | None, list[int]]:
    """(the measurement of the set kept, the ids of the tasks whose winners are dropped). ``measure`` answers None
    once the time budget has no room for another measurement: with no first measurement nothing is dropped; cut
    later, the check decides on what it has measured. ``refine`` (default ``measure``) takes the measurements that
    find which winners to drop, which may stop sooner to keep time for a measurement after the check. ``measured``:
    {kind of winner: the ratio to the base its winners gave the whole workload when the sweep measured them alone}."""
    refine = refine or measure
    parts = {name: tasks for name, tasks in parts.items() if tasks}
    whole = measure(_kinds(parts))
    if whole is None or not whole.ok:
        return whole, []
    alone = _beaten_by(whole, parts, measured or {}, min_gain)
    if alone is not None and not whole.slower_than_default(min_gain):
        note(
            f"all winners together are {whole.ratio:.2f}x the time without them, the {alone} winners alone were "
            f"{(measured or {})[alone]:.2f}x: measuring them alone, then adding the others back a group at a time"
        )
        return _from_alone(refine, parts, alone, whole, min_gain)
    if not whole.slower_than_default(min_gain):  # slower only inside the noise: kept
        return whole, []
    note(f"all winners together are {whole.ratio:.2f}x the time without them: measuring without each kind of winner")
    best, blamed = whole, None
    for name in parts:
        m = refine(_kinds(parts, skip=name))
        if m is None:
            break
        if _better(m, best):
            best, blamed = m, name
    if (
        blamed is None or best.ratio is None or best.ratio > 1 + min_gain
    ):  # no single kind is to blame: keep Inductor's defaults
        everything = [tid for tasks in parts.values() for tid in tasks]
        return Measurement(best.status, best.baseline_ms, best.baseline_ms, 0.0, best.baseline_ms), everything
    if len(parts[blamed]) > 1:
        note(f"without the {blamed} winners: {best.ratio:.2f}x; adding them back a group at a time")
        return add_back(refine, _kinds(parts, skip=blamed), best, list(parts[blamed].items()), min_gain)
    return best, list(parts[blamed])


def _beaten_by(whole: Measurement, parts: Parts, measured: dict[str, float], min_gain: float) -> str | None:
    """The kind whose winners, measured alone over the whole workload, made it faster than all winners together do:
    the others then cost more than they gain, although each was faster at its own site or kernel."""
    if whole.ratio is None or len(parts) < 2:
        return None
    return next(
        (
            name
            for name, ratio in sorted(measured.items(), key=lambda kv: kv[1])
            if name in parts and whole.ratio > ratio * (1 + min_gain)
        ),
        None,
    )


def _from_alone(
    refine: MeasureForcing, parts: Parts, alone: str, whole: Measurement, min_gain: float
) -> tuple[Measurement, list[int]]:
    """``alone``'s winners measured by themselves in this run; where they beat the whole by the minimum gain, the other
    winners are added back to them by halves (:func:`add_back`), else every winner stays."""
    kept = _kinds({alone: parts[alone]})
    m = refine(kept)
    if m is None or not _better(m, whole, by=min_gain):
        return whole, []
    others = [(tid, f) for name, tasks in parts.items() if name != alone for tid, f in tasks.items()]
    return add_back(refine, kept, m, others, min_gain)


def add_back(
    measure: MeasureForcing,
    kept: Forcing,
    best: Measurement,
    tasks: list[tuple[int, Forcing]],
    min_gain: float,
    most: int = REFINE_MEASUREMENTS,
) -> tuple[Measurement, list[int]]:
    """Group testing: add each half of ``tasks`` back to ``kept`` and keep it when the whole gets faster by
    ``min_gain``; split a half that does not, down to single winners. At most ``most`` measurements; what is
    left unmeasured stays dropped. (the best measurement, the ids dropped)"""
    queue, dropped = _halves(tasks), []
    while queue:
        group = queue.pop(0)
        if most <= 0:
            dropped += [tid for tid, _ in group]
            continue
        with_group = Forcing.union([kept, *(f for _, f in group)])
        m = measure(with_group)
        if m is None:  # no time left: what is not measured stays dropped
            dropped += [tid for tid, _ in group]
            most = 0
            continue
        most -= 1
        if _better(m, best, by=min_gain):
            kept, best = with_group, m
        elif len(group) > 1:
            queue[:0] = _halves(group)  # depth first: a harmful winner is isolated before the next group is tried
        else:
            dropped.append(group[0][0])
    return best, dropped


def _halves(items: list[tuple[int, Forcing]]) -> list[list[tuple[int, Forcing]]]:
    half = (len(items) + 1) // 2
    return [g for g in (items[:half], items[half:]) if g]
