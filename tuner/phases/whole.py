"""The whole-workload phase: every winner together against Inductor's defaults, end to end (the check itself is
:mod:`tuner.workload_check`); the winners it drops go back to the defaults. With several workers, the last one to
finish runs it."""

from __future__ import annotations

from tuner.core import GRAPH_KINDS, WINNER_GROUPS, Forcing
from tuner.db.claims import held_by_others, worker_id
from tuner.measure import GraphTrial, Measurement
from tuner.phases.base import Phase, Plan, SweepContext
from tuner.winners import revert_to_defaults, stored_outcome
from tuner.workload_check import check_whole


WHOLE = "whole workload"  # the cost kind of one whole-workload measurement
# What one costs before it has been timed: the winners' compile (the defaults' is the capture's, which a live worker
# keeps; one that must start again compiles them first). Estimated before from a fusion trial's time scaled to the
# check's rounds, a 231-s resnet50 sweep (H200) skipped its check with 34 s left: that trial's 31 s were two compiles,
# and the check's winners were the trial's compiled base (bench/results/h200/sweep-cost/sweep-resnet50-default-s11.log).
WHOLE_COMPILES = 1


class WholeCheckPhase(Phase):
    name = "whole-workload check"
    past_budget = True  # it settles what was measured; a compile of the result must not be slower than Inductor's

    def __init__(self) -> None:
        self.checked = False
        self.reverted: dict[int, dict] = {}
        self.default_ms: float | None = None
        self.tuned_ms: float | None = None

    def plan(self, sweep: SweepContext) -> Plan:
        _collect_outcomes(sweep)
        if not sweep.time_left():
            sweep.progress.note("time budget reached: unfinished tasks keep their best so far or Inductor's defaults; rerun to continue them")
        busy = held_by_others(sweep.db, [r.id for r in sweep.workload.records], sweep.tuning.device_id, worker_id())
        if busy:
            sweep.progress.note(f"{len(busy)} task(s) still being tuned by other workers: the last one to finish checks the whole workload")
            return Plan([], 0)
        if all(o.is_default for o in sweep.outcomes.values()):
            graphs = [o.default_ms for o in sweep.outcomes.values() if o.default_ms and o.task.kind in GRAPH_KINDS]
            self.default_ms = self.tuned_ms = graphs[-1] if graphs else None
            return Plan([], 0)
        return Plan([], 0, due=True)

    def run(self, sweep: SweepContext, deadline: float | None) -> None:
        sweep.progress.note("measuring the whole workload: all winners vs Inductor's defaults")
        winners = sweep.winners()
        parts = {name: winners.parts(sweep.workload.pairs(kinds), defaults=False) for name, kinds in WINNER_GROUPS.items()}

        tuning = sweep.tuning

        def measure(f: Forcing) -> Measurement | None:
            if not tuning.settles(WHOLE, fallback=None, compiles=WHOLE_COMPILES + (0 if sweep.worker.alive else 1)):
                return None
            with tuning.costs.timed(WHOLE):
                return sweep.worker.run(GraphTrial({}, f.to_json(), sweep.budget.verify_rounds, sweep.budget.min_sample_ms))

        m, dropped = check_whole(measure, parts, sweep.budget.min_gain, sweep.progress.note)
        self.checked = m is not None
        if m is None:
            sweep.progress.note("the time budget left no room to measure the whole workload: the winners stay as verified one by one")
        elif m.ok:
            self.default_ms, self.tuned_ms = m.baseline_ms, m.median_ms
        else:
            sweep.progress.note(f"the whole-workload check failed: {m.status.value}: {m.error}")
        drop = set(dropped)
        self.reverted = revert_to_defaults(sweep.db, sweep.tuning.device_id, [(t, r) for t, r in sweep.workload.pairs() if r.id in drop])
        if self.reverted:
            names = [t.name for t, r in sweep.workload.pairs() if r.id in self.reverted]
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            sweep.progress.note(f"{len(self.reverted)} winner(s) went back to Inductor's defaults, as the workload was slower with them: {shown}")
            for tid, default in self.reverted.items():
                if tid in sweep.outcomes:
                    sweep.outcomes[tid] = sweep.outcomes[tid].reverted(default)


def _collect_outcomes(sweep: SweepContext) -> None:
    """Every task's outcome: this run's, or the stored one (another worker or an earlier run finished it)."""
    for t, r in sweep.workload.pairs():
        if r.id not in sweep.outcomes:
            stored = stored_outcome(sweep.db, sweep.tuning.device_id, r, t)
            if stored is not None:
                sweep.outcomes[r.id] = stored
