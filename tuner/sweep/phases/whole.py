"""The whole-workload phase: every winner together against Inductor's defaults (under CUDA graphs, where the sweep keeps
them), end to end (the check itself is :mod:`tuner.sweep.workload_check`); the winners it drops go back to the defaults.
With several workers, the last one to finish runs it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from tuner.budget.estimate import UNFROZEN_COMPILES, WHOLE_COMPILES
from tuner.budget import names
from tuner.core import Forcing, Kind, TaskSpec
from tuner.kinds import beside_base, groups, where
from tuner.db import TaskRecord
from tuner.db.claims import held_by_others, worker_id
from tuner.measure import GraphTrial, Measurement
from tuner.sweep.phases.base import Phase, Plan, SweepContext
from tuner.sweep import credited
from tuner.budget.clock import CLOSING_S
from tuner.sweep.phases import cuda_graphs
from tuner.search_spaces.freezing import KIND as FREEZING_KIND, unfrozen
from tuner.sweep.phases.freezing import UNFROZEN, store
from tuner.sweep.transferred import transferred
from tuner.sweep.winners import revert_outcomes, stored_outcome
from tuner.sweep.workload_check import check_whole


WHOLE = "whole workload"  # the cost kind of one whole-workload measurement
TRANSFERRED = "transferred"  # the check's group of answers transferred from other sizes (``tuner.sweep.transferred``)


class WholeCheckPhase(Phase):
    name = names.WHOLE_CHECK
    past_budget = True  # it settles what was measured; a compile of the result must not be slower than Inductor's

    def __init__(self) -> None:
        self.checked = False
        self.reverted: dict[int, dict] = {}
        self.default_ms: float | None = None
        self.tuned_ms: float | None = None
        self.baseline = "Inductor's defaults"  # what ``default_ms`` timed

    def plan(self, sweep: SweepContext) -> Plan:
        self.baseline = _baseline_name(sweep, self.baseline)
        _collect_outcomes(sweep)
        if not sweep.time_left():
            sweep.progress.note(
                "time budget reached: unfinished tasks keep their best so far or Inductor's defaults; rerun to continue them"
            )
        busy = held_by_others(sweep.db, [r.id for r in sweep.workload.records], sweep.tuning.device_id, worker_id())
        if busy:
            sweep.progress.note(
                f"{len(busy)} task(s) still being tuned by other workers: the last one to finish checks the whole workload"
            )
            return Plan([], 0)
        if all(o.is_default for o in sweep.outcomes.values()) and not base_and_parts(sweep)[1][TRANSFERRED]:
            graphs = [
                o.default_ms for o in sweep.outcomes.values() if o.default_ms and o.task.kind in groups()["graph-knob"]
            ]
            self.default_ms = self.tuned_ms = graphs[-1] if graphs else None
            return Plan([], 0, due=bool(_frozen(sweep)))  # nothing to check together, but whether to freeze
        return Plan([], 0, due=True)

    def lend(self, sweep: SweepContext, to: str) -> None:
        """Give the time kept for the end to the last search (``to``, whose every trial times the whole workload against
        the winners so far) where nothing would be left to check: no winner beyond CUDA graphs and freezing, the
        workload's freezing settled, one worker. Whatever that search wins it has measured in the whole workload; the
        check then times it again only if time is left. (A 150-s CPU sweep of mnasnet1_0 ended at 114 s with no
        winner to check: its last search stopped where the time kept for the end began.)"""
        tuning = sweep.tuning
        if tuning.deadline is None or tuning.settle_by is None or sweep.workers > 1 or _frozen(sweep):
            return
        if any(base_and_parts(sweep)[1].values()):
            return
        end = tuning.settle_by - CLOSING_S
        if end - tuning.deadline >= 1.0:
            sweep.progress.note(
                f"no winner so far for the whole-workload check to check: the {end - tuning.deadline:.0f} s kept for it go to the {to}"
            )
            sweep.tuning = dataclasses.replace(tuning, deadline=end)

    def run(self, sweep: SweepContext, deadline: float | None) -> None:
        with sweep.worker.held():  # the worker that holds the defaults' compile: the end's time counts no other
            self._run(sweep)

    def _run(self, sweep: SweepContext) -> None:
        base, parts = base_and_parts(sweep)
        measure = _measurer(sweep, base)
        if base != Forcing():
            self.baseline = _baseline_name(sweep, "Inductor's defaults under CUDA graphs")
        m, dropped = None, []
        if parts[TRANSFERRED]:
            sweep.progress.note(
                f"{len(parts[TRANSFERRED])} task(s) with no winner would take the answer of the nearest stored sizes in a "
                "compile: the check times them with the winners"
            )
        if any(parts.values()):
            m, dropped = self._check(sweep, measure, parts)
        else:
            self._base_only(sweep)
        drop = set(dropped)
        if m is None or m.ok:
            kept = Forcing.union(
                [base, *(f for tasks in parts.values() for tid, f in tasks.items() if tid not in drop)]
            )
            compiles = (
                UNFROZEN_COMPILES if kept != Forcing() else 1
            )  # with no winner, the baseline is the capture's compile
            self._try_unfrozen(sweep, lambda f: measure(f, kept, compiles, kind=UNFROZEN), kept)
        self._revert(sweep, drop, set(parts[TRANSFERRED]))

    def _base_only(self, sweep: SweepContext) -> None:
        """With no winner beyond CUDA graphs and freezing there is nothing to check: the workload's times are their
        measurements', from the first one's baseline (Inductor's defaults) to the last one's winner."""
        won = [
            o
            for o in sweep.outcomes.values()
            if o.task.kind in (Kind.CUDA_GRAPH, FREEZING_KIND.value) and not o.is_default
        ]
        if won:
            self.checked, self.baseline = True, "Inductor's defaults"
            self.default_ms, self.tuned_ms = won[0].default_ms, won[-1].best_ms

    def _check(
        self, sweep: SweepContext, measure: Callable[..., Measurement | None], parts: dict
    ) -> tuple[Measurement | None, list[int]]:
        sweep.progress.note(f"measuring the whole workload: all winners vs {self.baseline}")
        m, dropped = check_whole(
            measure,
            parts,
            sweep.budget.min_gain,
            sweep.progress.note,
            _keeping_unfrozen(sweep, measure),
            measured_alone(sweep, parts),
        )
        self.checked = m is not None
        if m is None:
            sweep.progress.note(
                "the time budget left no room to measure the whole workload: the winners stay as verified one by one"
            )
            credited.unconfirmed(sweep)
        elif m.ok:
            self.default_ms, self.tuned_ms = m.baseline_ms, m.median_ms
        else:
            sweep.progress.note(f"the whole-workload check failed: {m.status.value}: {m.error}")
        return m, dropped

    def _revert(self, sweep: SweepContext, drop: set[int], moved: set[int]) -> None:
        """Drop the winners in ``drop``; those of ``moved`` were answers transferred from other sizes (their tasks get
        the default stored, which no compile overrides with a transfer)."""
        self.reverted = revert_outcomes(
            sweep.db,
            sweep.tuning.device_id,
            [(t, r) for t, r in sweep.workload.pairs() if r.id in drop],
            sweep.outcomes,
        )
        for which, ids in (
            ("winner(s) went back to", set(self.reverted) - moved),
            ("answer(s) transferred from other sizes were replaced by", set(self.reverted) & moved),
        ):
            names = [t.name for t, r in sweep.workload.pairs() if r.id in ids]
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            if names:
                sweep.progress.note(
                    f"{len(names)} {which} Inductor's defaults, as the workload was slower with them: {shown}"
                )

    def _try_unfrozen(
        self, sweep: SweepContext, measure: Callable[[Forcing], Measurement | None], kept: Forcing
    ) -> None:
        """Time the workload with its frozen graphs compiled unfrozen against the winners kept (frozen), in one run;
        where that wins by the budget's gain and past the noise, it becomes those graphs' grouping winner."""
        frozen = _frozen(sweep)
        if not frozen:
            return
        m = measure(Forcing.union([kept, *(t.forcing(unfrozen()) for t, _ in frozen)]))
        if m is None or not m.ok:
            sweep.progress.note(
                "no time was left to measure the workload without freezing"
                if m is None
                else f"the workload without freezing failed: {m.status.value}: {m.error}"
            )
            return
        store(sweep, frozen, m, "frozen with the winners")


def _keeping_unfrozen(
    sweep: SweepContext, measure: Callable[..., Measurement | None]
) -> Callable[[Forcing], Measurement | None]:
    """The drop search's measurements, each taken only when the workload's unfrozen measurement still fits after it:
    that one decides in one measurement what can move the whole by far more than a dropped winner does."""
    if not _frozen(sweep):
        return measure
    tuning = sweep.tuning
    return lambda f: measure(f, reserve_s=tuning.expected(UNFROZEN, None, UNFROZEN_COMPILES))


def _baseline_name(sweep: SweepContext, baseline: str) -> str:
    """What the check's baseline is called: without freezing where the workload was captured again so (``FreezingPhase``)."""
    return baseline + (" without freezing" if sweep.former and not baseline.endswith("without freezing") else "")


def measured_alone(sweep: SweepContext, parts: dict[str, dict[int, Forcing]]) -> dict[str, float]:
    """{kind of winner: the best ratio to its base that one of its winners among ``parts`` gave the whole workload},
    for the kinds whose trials time the whole workload beside its base (a fusion grouping): what the check's whole
    must not fall behind."""
    out: dict[str, float] = {}
    for group, tasks in parts.items():
        ratios = [
            o.best_ms / o.default_ms
            for tid in tasks
            if (o := sweep.outcomes.get(tid)) is not None
            and not o.is_default
            and o.default_ms
            and o.best_ms
            and beside_base(o.task.kind)
        ]
        if ratios:
            out[group] = min(ratios)
    return out


def base_and_parts(sweep: SweepContext) -> tuple[Forcing, dict[str, dict[int, Forcing]]]:
    """What the check times the winners against, and the winners it may drop, by group ({group: {task id: forcing}}).
    The base is Inductor's defaults under CUDA graphs where the sweep keeps them (else the defaults): what Inductor's
    reduce-overhead mode runs, so a winner that is faster at its site but slower in the workload is found there.
    Against the defaults alone, CUDA graphs' own gain (3.4x on vit_b_32, H200) hides any such loss."""
    winners = sweep.winners()
    base = cuda_graphs.kept(sweep, winners)
    parts = {
        name: {
            tid: f for tid, f in winners.parts(sweep.workload.pairs(kinds), defaults=False).items() if tid not in base
        }
        for name, kinds in groups().items()
    }
    parts[TRANSFERRED] = transferred(
        sweep.db.winners_for_device(sweep.tuning.device_fingerprint), sweep.workload.pairs(), set(winners.configs)
    )
    return Forcing.union(base.values()), parts


def _measurer(sweep: SweepContext, base: Forcing = Forcing()) -> Callable[..., Measurement | None]:
    """One whole-workload measurement: ``candidate`` on top of ``base`` timed against ``baseline`` (``base`` unless
    given), or None when the sweep has no time left for it (``compiles``: what it costs before it is timed, by default
    the candidate's and a base's other than the defaults, whose compile the worker keeps; ``reserve_s``: time that
    must be left after it; ``kind``: whose recent cost it is expected to take). The check's candidates are the winners
    alone: timed without the base, a workload kept under CUDA graphs would run its winners without them (vit_b_32 on
    the H200: "2.12x" the base) and drop every one."""
    tuning = sweep.tuning

    def measure(
        candidate: Forcing,
        baseline: Forcing = base,
        compiles: int = WHOLE_COMPILES + (base != Forcing()),
        reserve_s: float = 0.0,
        kind: str = WHOLE,
    ) -> Measurement | None:
        if not tuning.settles(
            kind, fallback=None, compiles=compiles + (0 if sweep.worker.alive else 1), reserve_s=reserve_s
        ):
            return None
        with tuning.costs.timed(kind):
            job = GraphTrial(
                baseline.to_json(),
                Forcing.union([base, candidate]).to_json(),
                sweep.budget.verify_rounds,
                sweep.budget.min_sample_ms,
            )
            return sweep.worker.run(job)

    return measure


def _frozen(sweep: SweepContext) -> list[tuple[TaskSpec, TaskRecord]]:
    """The workload's freezing tasks (its graphs compiled frozen); none where the freezing phase settled them before
    the searches."""
    if sweep.freezing_settled:
        return []
    return sweep.workload.pairs(where(phase=FREEZING_KIND.phase))


def _collect_outcomes(sweep: SweepContext) -> None:
    """Every task's outcome: this run's, or the stored one (another worker or an earlier run finished it)."""
    for t, r in sweep.workload.pairs():
        if r.id not in sweep.outcomes:
            stored = stored_outcome(sweep.db, sweep.tuning.device_id, r, t)
            if stored is not None:
                sweep.outcomes[r.id] = stored
