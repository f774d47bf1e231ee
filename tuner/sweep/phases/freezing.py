"""The freezing phase: whether an inference workload runs frozen, decided before any search.

Freezing (weights folded in as constants, oneDNN's weight prepacking on the CPU) is what Inductor's strongest mode
does, and it loses on some models. Decided at the end, after the searches had tuned the frozen graphs, an unfrozen
answer would throw their winners away, and a short sweep might find no time for it at all. Here the workload with every
frozen graph compiled unfrozen is timed against the capture's frozen compile first, in one run; where it wins by the
budget's minimum gain and past the noise, those graphs' answer (``search_spaces/freezing.py``) is to compile unfrozen,
and the workload is captured again without freezing, so the searches tune the graphs a compile with ``backend="tuned"``
will run (the frozen graph's answer restarts its compile unfrozen, ``backend/hooks/restart.py``, and the unfrozen graph
finds its own answers). A rerun reads the stored answer.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tuner.budget import names
from tuner.core import Forcing, TaskOutcome
from tuner.errors import TunerError
from tuner.kinds import where
from tuner.measure import GraphTrial
from tuner.budget import clock
from tuner.budget.clock import CAPTURE, fits, with_instances
from tuner.sweep.phases.base import Phase, Plan, SweepContext, Workload
from tuner.sweep.phases import cuda_graphs
from tuner.sweep.phases.graphs import verify_instances
from tuner.study.context import record
from tuner.search_spaces.freezing import unfrozen
from tuner.sweep.tasks import tasks_from_capture
from tuner.sweep.winners import stored_outcome

UNFROZEN = "whole workload unfrozen"  # the cost kind of one measurement of the workload unfrozen


class FreezingPhase(Phase):
    name = names.FREEZING
    whole_step = True
    # Of the time left when it starts, as the template sites' first share, but at least its measurement (one compile,
    # two on top of CUDA graphs) where the sweep's deadline holds it: the question moves a small CPU model more than
    # its first site batch does. Unfrozen, Inductor's default beat freezing + max-autotune by 1.2-1.7x on
    # mobilenet_v3_small, mobilenet_v2, shufflenet_v2_x1_0 and efficientnet_b0 at 64x64 on a 2-core CPU (the README's
    # CPU table), where a site batch won a few percent; a 60-s mnasnet0_5 sweep whose cold compile took 16 s had 14 s
    # of share for it and skipped it.
    share = 0.4

    def __init__(self) -> None:
        self.pairs: list[Any] = []  # the freezing tasks: the graphs the capture compiled frozen
        self.switched = False  # the workload was captured again, unfrozen
        self.idle_share: float | None = None  # of that capture's default step

    def plan(self, sweep: SweepContext) -> Plan:
        self.pairs = sweep.workload.pairs(where(phase=self.name))
        if not self.pairs:
            return Plan([], 0)
        self.compiles = (
            _compiles(sweep) + 0.05
        )  # the least time it is given (``deadline_for``), with the moments before it starts
        return Plan(
            [t for t, _ in self.pairs], 1, seconds=self.measure_s(sweep)
        )  # a capture follows only where unfrozen wins

    def measure_s(self, sweep: SweepContext) -> float:
        """Its measurement: the unfrozen compile, and the baseline's where that is not the capture's (under CUDA
        graphs), then their timing."""
        return sweep.tuning.costs.expect(UNFROZEN) or _compiles(sweep) * sweep.tuning.costs.expect(CAPTURE)

    def run(self, sweep: SweepContext, deadline: float | None) -> None:
        wins = self._stored(sweep)
        if wins is None:
            m = self._measure(sweep, deadline)
            if m is None:
                sweep.progress.note(
                    "no time to time the workload without freezing before the searches: it is tuned frozen"
                )
            else:
                wins = self._store(sweep, self._again(sweep, m))
        sweep.settle_freezing()  # the end's check does not time it
        if wins:
            self._capture_unfrozen(sweep)

    def _stored(self, sweep: SweepContext) -> bool | None:
        """What an earlier sweep settled (True: unfrozen won), or None where it never timed the workload unfrozen."""
        winners = sweep.db.winner_configs([r.id for _, r in self.pairs], sweep.tuning.device_id)
        if any((winners.get(r.id) or {}).get("freezing") is False for _, r in self.pairs):
            sweep.progress.note("an earlier sweep found this workload faster without freezing: it is tuned unfrozen")
            sweep.add(
                [o for t, r in self.pairs if (o := stored_outcome(sweep.db, sweep.tuning.device_id, r, t)) is not None]
            )
            return True
        if all(sweep.db.find_trial(r.id, sweep.tuning.device_id, unfrozen()) is not None for _, r in self.pairs):
            return False
        return None

    def _measure(self, sweep: SweepContext, deadline: float | None) -> Any:
        """The workload with its frozen graphs compiled unfrozen against the capture's frozen compile (under CUDA
        graphs where the sweep keeps them), or None where that does not fit before ``deadline``."""
        if not fits(deadline, self.measure_s(sweep)):
            return None
        sweep.progress.note(
            "timing the workload without freezing against the capture's frozen compile, before any search"
        )
        with sweep.tuning.costs.timed(UNFROZEN):
            return sweep.worker.run(self._trial(sweep))

    def _trial(self, sweep: SweepContext, instances: int = 1) -> GraphTrial:
        base = _base(sweep)
        candidate = Forcing.union([base, *(t.forcing(unfrozen()) for t, _ in self.pairs)])
        return GraphTrial(
            base.to_json(), candidate.to_json(), sweep.budget.verify_rounds, sweep.budget.min_sample_ms, instances
        )

    def _again(self, sweep: SweepContext, m: Any) -> Any:
        """A first timing whose median gain clears the budget's minimum but not the noise it measured is timed once
        more where the sweep's own deadline (a verification's) allows, and that timing decides: the answer moves the
        whole workload, more than the searches after it expect to (regnet_x_400mf at 64x64 on a 2-core CPU ran 0.880x
        unfrozen inside IQRs of 11-13%, stayed frozen, and tuned ran 1.085x Inductor's default). Where compiled
        instances differ measurably (the CPU), it times fresh instances of both sides beside the held ones."""
        if not undecided(m, sweep.budget.min_gain):
            return m
        instances = verify_instances(sweep.worker)
        said = (
            f"without freezing: {m.median_ms:.4g} ms against {m.baseline_ms:.4g} ms frozen ({m.ratio:.3f}x), "
            f"inside the noise ({m.noise_ms:.3g} ms)"
        )
        expected = again_s(self.measure_s(sweep), sweep.tuning.costs.expect(CAPTURE) or 0.0, instances)
        if not fits(sweep.tuning.settle_by, expected):  # a verification's deadline: the sweep's own
            sweep.progress.note(f"{said}; no time to time it again (~{expected:.0f} s)")
            return m
        sweep.progress.note(
            f"{said}: timing it again" + (f" with {instances} instances of each side" if instances > 1 else "")
        )
        return sweep.worker.run(self._trial(sweep, instances))

    def _store(self, sweep: SweepContext, m: Any) -> bool:
        """Each frozen graph's trial and its answer: unfrozen where that won, else frozen. Whether it won."""
        if not m.ok:
            sweep.progress.note(f"the workload without freezing failed: {m.status.value}: {m.error}")
        return store(sweep, self.pairs, m, "frozen")

    def _capture_unfrozen(self, sweep: SweepContext) -> None:
        """The workload captured again with its frozen graphs' answer forced, as a tuned compile runs it (Dynamo's
        trace with freezing on, each graph compiled again unfrozen); its tasks become the sweep's, and every later
        compile of the worker forces that answer beneath its own. Where that does not fit, the searches stop: they
        would tune frozen graphs that a tuned compile no longer runs."""
        former = [r for _, r in sweep.workload.pairs()]
        empty = Workload(sweep.db, sweep.workload.name)
        if not fits(sweep.tuning.deadline, _capture_s(sweep)):
            sweep.progress.note(
                "no time to capture the workload without freezing: it runs unfrozen with Inductor's defaults"
            )
            _stop(sweep, empty, former)
            return
        sweep.progress.note("capturing the workload again without freezing (compiling with Inductor's defaults)")
        sweep.worker.base = Forcing.union(t.forcing(unfrozen()) for t, _ in self.pairs).to_json()
        try:
            capture = sweep.worker.start(
                max(1.0, sweep.tuning.settle_by - clock.now()) if sweep.tuning.settle_by else None
            )
        except TunerError as e:
            sweep.progress.note(
                f"the capture without freezing failed ({e}): the workload runs unfrozen with Inductor's defaults"
            )
            _stop(sweep, empty, former)
            return
        sweep.progress.note(capture.cost_line())
        empty.register(tasks_from_capture(capture, sweep.model))
        sweep.replace_workload(empty, former, capture)
        self.switched, self.idle_share = True, capture.idle_share


def _stop(sweep: SweepContext, empty: Workload, former: list[Any]) -> None:
    """No search after this: the frozen graphs' tasks are no longer what a tuned compile runs, and the unfrozen ones'
    are not known."""
    sweep.replace_workload(empty, former)
    sweep.recorded = []
    sweep.tuning = dataclasses.replace(sweep.tuning, deadline=clock.now())


def store(sweep: SweepContext, pairs: list[Any], m: Any, against: str) -> bool:
    """Each frozen graph's trial (``m``: the workload unfrozen against ``against``, its frozen baseline) and its
    answer: unfrozen where that wins by the budget's gain and past the noise, else frozen, so that every task of a
    swept workload has an answer. Whether unfrozen won."""
    wins = m.ok and m.beats_default(sweep.budget.min_gain)
    if m.ok:
        sweep.progress.note(
            f"without freezing: {m.median_ms:.4g} ms against {m.baseline_ms:.4g} ms {against} ({m.ratio:.3f}x): "
            + ("kept, unfrozen" if wins else "frozen stays")
        )
    for t, r in pairs:
        trial = record(sweep.tuning, r, unfrozen(), m)
        if wins:
            sweep.db.set_winner(r.id, sweep.tuning.device_id, trial.id, unfrozen(), m.median_ms, m.baseline_ms)
        elif m.ok:
            sweep.db.keep_default(r.id, sweep.tuning.device_id, t.space.default)
        sweep.outcomes[r.id] = TaskOutcome(
            r,
            unfrozen() if wins else t.space.default,
            not wins,
            m.baseline_ms,
            m.median_ms if wins else m.baseline_ms,
            1,
            1,
        )
    sweep.unfrozen_ratio = m.ratio if wins else None
    return wins


def undecided(m: Any, min_gain: float) -> bool:
    """Whether a timing of the workload unfrozen is faster by the minimum gain at its median, but inside the noise."""
    return bool(m.ok and m.ratio is not None and m.ratio < 1 - min_gain and m.within_noise)


def again_s(first_s: float, compile_s: float, instances: int) -> float:
    """The expected cost of a second timing: the first's timing (its cost less a compile, at least a quarter of one),
    with ``instances`` of each side."""
    return with_instances(max(first_s - compile_s, 0.25 * compile_s), compile_s, instances)


def _base(sweep: SweepContext) -> Forcing:
    """What the measurement's both arms run on: CUDA graphs where the sweep keeps them."""
    return Forcing.union(cuda_graphs.kept(sweep).values())


def _compiles(sweep: SweepContext) -> float:
    """The measurement's cost before one is timed, in compiles of the workload: the unfrozen compile, the baseline's
    where that is not the capture's (under CUDA graphs), and their timing (a quarter of a compile)."""
    return 1.25 + (_base(sweep) != Forcing())


def _capture_s(sweep: SweepContext) -> float:
    """What a capture of the workload costs: the sweep's own took this long, start to end."""
    return sweep.capture_s or sweep.tuning.costs.expect(CAPTURE)
