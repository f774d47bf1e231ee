"""The graph-level phases: each trial compiles and times the whole workload with every earlier winner forced.
CPU codegen knobs per graph; the graph studies of kinds with a phase of their own (the attention backends); then
fusion groupings per graph (recorded from a compile with the winners so far)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from tuner.budget.estimate import TRIAL_COMPILES
from tuner.budget import names
from tuner.core import Forcing, Kind, TaskSpec
from tuner.errors import WorkloadError
from tuner.kinds import KERNEL_HOOK, where
from tuner.measure import GraphTrial
from tuner.search_spaces.attention import KIND as ATTENTION
from tuner.search_spaces.fusion import REWRITE_KNOBS
from tuner.sweep.attention_alone import math_sites, rank_math, settle_alone, timed_alone
from tuner.budget.estimate import ALONE
from tuner.sweep.phases.base import Phase, Plan, SweepContext, planned
from tuner.sweep.scheduler import tune_tasks
from tuner.study.context import Measure
from tuner.sweep.tasks import fusion_tasks
from tuner.sweep.winners import StoredWinners


# Instances of each side a verification times where compiled instances differ measurably (the CPU): a trial times its
# candidate against the capture's one instance, so the best of several trials is as likely the best-placed instance.
VERIFY_INSTANCES = 2


def verify_instances(worker: Any) -> int:
    """The instances of each side a verification times: :data:`VERIFY_INSTANCES` where the worker's capture measured
    the spread between compiled instances (the CPU), else the one held."""
    return VERIFY_INSTANCES if getattr(worker, "instance_spread_ms", None) is not None else 1


def graph_trial(
    task: TaskSpec, config: dict[str, Any], base: Forcing, rounds: int, min_sample_ms: float, instances: int = 1
) -> GraphTrial:
    """The whole workload with ``config`` applied to ``task`` on top of ``base``, against ``base`` alone."""
    return GraphTrial(base.to_json(), base.merged(task.forcing(config)).to_json(), rounds, min_sample_ms, instances)


def _tune(
    sweep: SweepContext, deadline: float | None, pairs: list[Any], under: Forcing, target: int | None = None
) -> None:
    """Claim and tune these graph-level tasks (joining other workers' studies when nothing is left to claim)."""

    def measure_for(task: TaskSpec, base: Forcing) -> Measure:
        both = under.merged(base)

        def measure(config: dict[str, Any], rounds: int, instances: int = 1) -> Any:
            return sweep.worker.run(graph_trial(task, config, both, rounds, sweep.budget.min_sample_ms, instances))

        # A verification finds both compiles in the worker where the last trial was this config's (``settle.held``).
        measure.holds = lambda config: (
            sweep.worker.holds(both) and sweep.worker.holds(both.merged(task.forcing(config)))
        )  # type: ignore[attr-defined]
        if (
            instances := verify_instances(sweep.worker)
        ) > 1:  # ... and times fresh instances of both sides too (``settle.verifier``)
            measure.verify = functools.partial(measure, instances=instances)  # type: ignore[attr-defined]
            measure.verify.instances = instances  # type: ignore[attr-defined]
        return measure

    tasks, records = [t for t, _ in pairs], [r for _, r in pairs]
    tuning = dataclasses.replace(sweep.until(deadline), base_held=sweep.worker.holds(under))
    got, _ = tune_tasks(tuning, tasks, records, measure_for, sweep.winners(), sweep.progress, target=target, join=True)
    sweep.add(got)


class GraphKnobPhase(Phase):
    """The CPU codegen knobs of each compiled graph, with the template-site winners forced."""

    name = names.GRAPH_KNOBS
    whole_step = True

    def __init__(self, share: float = 1.0):
        self.share = share
        self.graphs: list[Any] = []

    def plan(self, sweep: SweepContext) -> Plan:
        self.graphs = sweep.workload.pairs(where(phase=self.name))
        tasks = [t for t, _ in self.graphs]
        return Plan(tasks, *self.trials(sweep, tasks))

    @staticmethod
    def trials(sweep: SweepContext, graphs: list[TaskSpec]) -> tuple[int, list[tuple[str, int]]]:
        """The trials the phase plans for ``graphs`` and their cost kinds."""
        each = [(str(g.kind), planned(sweep.budget.trials, [g])) for g in graphs]
        return sum(n for _, n in each), each

    def run(self, sweep: SweepContext, deadline: float | None) -> None:
        sites = sweep.winners().forcing(sweep.workload.pairs((Kind.SITE,)))
        _tune(sweep, deadline, self.graphs, sites)


class GraphStudyPhase(GraphKnobPhase):
    """The tasks of the graph-hooked kinds whose ``phase`` is ``name`` (one no built-in phase has: the attention
    backends, say), each measured end to end with every winner so far forced; on CUDA, the attention tasks whose
    sites can be rebuilt are settled by timing those alone first (``tuner.sweep.attention_alone``), with no compile,
    so the phase is then no run of whole-workload trials (``whole_step``)."""

    def __init__(self, name: str, share: float = 1.0, device_type: str = "cpu"):
        super().__init__(share)
        self.name = name
        self.whole_step = not (device_type == "cuda" and name == ATTENTION.phase)

    def plan(self, sweep: SweepContext) -> Plan:
        """As the graph-knob phase plans; where a task is measured end to end (not timed alone), the phase is given at
        least one such trial's compiles (:data:`TRIAL_COMPILES`): BERT-base's attention, run as math, was expected
        to gain 1.9 ms of a 5.3-ms step, and its 24-s share of a 93-s budget held no 25-s trial."""
        plan = super().plan(sweep)
        self.compiles = TRIAL_COMPILES if any(not timed_alone(t, sweep.device_type) for t, _ in self.graphs) else 0.0
        return plan

    @staticmethod
    def trials(sweep: SweepContext, graphs: list[TaskSpec]) -> tuple[int, list[tuple[str, int]]]:
        """One timing of the sites of every task timed alone, one of the fused backends at the sites run as math, then
        the trials of the others."""
        alone = [g for g in graphs if timed_alone(g, sweep.device_type)]
        n, each = GraphKnobPhase.trials(sweep, [g for g in graphs if g not in alone])
        timings = bool(alone) + any(math_sites(g, sweep.device_type) for g in graphs)
        return (n + timings, [(ALONE, timings), *each]) if timings else (n, each)

    def run(self, sweep: SweepContext, deadline: float | None) -> None:
        left = rank_math(sweep, settle_alone(sweep, self.graphs, deadline), deadline)
        if left:
            _tune(sweep, deadline, left, sweep.winners().forcing(sweep.workload.pairs()))


def lowering(sweep: SweepContext, winners: StoredWinners, ignore: tuple[Kind, ...] = ()) -> dict[int, dict[str, Any]]:
    """{task id: what it forces} of the stored winners that change how the graphs lower: every winner but Inductor's
    defaults, CUDA graphs and Triton kernel configs (which launch or tune the kernels a lowering made, not which ones),
    and those of the kinds in ``ignore``."""
    neutral, pairs = {str(Kind.CUDA_GRAPH), *where(hook=KERNEL_HOOK), *map(str, ignore)}, sweep.workload.pairs()
    changed = winners.parts(pairs, defaults=False)
    return {r.id: changed[r.id].to_json() for t, r in pairs if r.id in changed and str(t.kind) not in neutral}


def lowers_as_captured(sweep: SweepContext, winners: StoredWinners) -> bool:
    """Whether the stored winners leave every graph's lowering as the capture recorded it."""
    return not lowering(sweep, winners)


class FusionPhase(Phase):
    """Each graph's fusion grouping, measured end to end with every winner so far forced."""

    name = names.FUSION
    whole_step = True

    def __init__(self, share: float = 1.0, compiles: float = 0.0):
        self.share = share
        self.compiles = compiles  # the least time worth giving it, in compiles (a grouping's trial is one)
        self.pairs: list[Any] = []  # planned (task, record) pairs; none when the phase did not run

    def plan(self, sweep: SweepContext) -> Plan:
        winners = sweep.winners()
        self.everything = winners.forcing(sweep.workload.pairs())
        recorded = self._recorded(sweep, winners)
        if not recorded:
            return Plan([], 0)
        self.pairs = sweep.workload.register_pairs(fusion_tasks(recorded, sweep.model, sweep.short_kernels))
        groupings = [t for t, _ in self.pairs]
        for g in groupings:
            for note in _first_measured(g.space):
                sweep.progress.note(f"{g.name}: {note}; the grouping with it is measured first")
        trials = planned(sweep.budget.fusion_target, groupings)
        return Plan(groupings, trials, cost=[(str(Kind.FUSION), trials)])

    def _recorded(self, sweep: SweepContext, winners: StoredWinners) -> list[dict[str, Any]]:
        """The graphs whose fusions are searched, said: the capture's while no winner changes how they lower; else those
        a recording compile with every winner so far forced meets, where it fits; else (no time, or it failed) the
        capture's where it recorded any: the rewrites and knobs apply to the graph as it was before lowering, whatever
        the winners, and a vetoed fusion the winners no longer make never matches (``backend/hooks/fusion.py``)."""
        note = sweep.progress.note
        if sweep.recorded and lowers_as_captured(sweep, winners):
            note("no winner so far changes how the graphs lower: the fusions the capture recorded are searched")
            return sweep.recorded
        why = "no time left to record the fusions with the winners so far forced"
        if sweep.can_capture(keep_end=True):
            note("recording the fusions Inductor makes with the winners so far forced")
            try:
                return sweep.record(self.everything).graphs
            except WorkloadError as e:  # the worker is replaced by the next job
                why = f"recording the fusions with the winners so far forced failed ({e})"
        note(
            f"{why}: "
            + (
                "the fusions the capture recorded are searched"
                if sweep.recorded
                else "fusion groupings are not searched"
            )
        )
        return sweep.recorded

    def run(self, sweep: SweepContext, deadline: float | None) -> None:
        _tune(sweep, deadline, self.pairs, self.everything, target=sweep.budget.fusion_target)


def _first_measured(space: Any) -> list[str]:
    """What a grouping's space holds that its first trial measures (``FusionSpace.evidence``), each said as found."""
    ctx, default, out = space.context, space.default, []
    if ctx.get("unshared_epilogues") and space.evidence():
        out.append(
            f"Inductor kept {ctx['unshared_epilogues']} template epilogue(s) apart for sharing no data at the same index "
            "(aggressive_fusion fuses them)"
        )
    out += [
        r.says.format(n=ctx[r.seen]) for r in REWRITE_KNOBS.values() if r.knob in default
    ]  # each offered where it applies
    if ctx.get("short_kernels") and default.get("combo_kernels") is False:
        out.append(
            f"the step is a run of short Triton kernels ({ctx['short_kernels']} launches; combo kernels launch independent "
            "ones as one)"
        )
    return out
