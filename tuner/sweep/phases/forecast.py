"""The expected time of a whole sweep, said before its phases start: each phase's planned trials (as the phases
plan them: their own ``trials``) times the cost per trial (``tuner.budget.estimate``), from what the capture compile
found. An estimate, labelled as one; the later phases' tasks may still change (a fusion grouping that wins makes new
kernels)."""

from __future__ import annotations

from typing import Any

from tuner.budget.clock import CAPTURE
from tuner.core import Kind
from tuner.kinds import where
from tuner.budget.estimate import UNFROZEN_COMPILES, WHOLE_COMPILES, expected_s
from tuner.sweep.phases.base import SweepContext
from tuner.sweep.phases.cuda_graphs import CudaGraphPhase
from tuner.sweep.phases.freezing import FreezingPhase
from tuner.sweep.phases import study_phases
from tuner.sweep.phases.graphs import FusionPhase, GraphKnobPhase, GraphStudyPhase
from tuner.sweep.phases.kernels import KernelPhase
from tuner.sweep.phases.sites import SitePhase
from tuner.sweep.phases.whole import WholeCheckPhase
from tuner.sweep.tasks import kernel_tasks


def forecast(
    sweep: SweepContext,
    kernel_records: list[dict[str, Any]],
    fusion_graphs: int,
    frozen: bool = False,
    cuda_graphs: CudaGraphPhase | None = None,
    freezing: FreezingPhase | None = None,
) -> dict[str, float]:
    """{phase: expected seconds} for the phases this sweep will run, from the capture's tasks and kernels;
    ``fusion_graphs``: the graphs whose groupings it will search (0: none); ``frozen``: some were compiled frozen,
    so the workload is timed unfrozen (by ``freezing``, the sweep's freezing phase, where it has one, else by the
    whole-workload check); ``cuda_graphs``: the sweep's CUDA-graph phase (on CUDA), which says what it costs."""
    costs, dev = sweep.tuning.costs, sweep.device_type
    tasks = sweep.workload.tasks
    measured_by = lambda name: [x for x in tasks if x.kind in where(phase=name)]  # noqa: E731
    out = {
        CudaGraphPhase.name: cuda_graphs.forecast_s(costs) if cuda_graphs else 0.0,
        FreezingPhase.name: freezing.measure_s(sweep) if freezing and frozen else 0.0,
        SitePhase.name: SitePhase.expected_s(sweep, measured_by(SitePhase.name)),
        KernelPhase.name: expected_s(costs, dev, KernelPhase.trials(sweep, kernel_tasks(kernel_records))[1]),
        GraphKnobPhase.name: expected_s(costs, dev, GraphKnobPhase.trials(sweep, measured_by(GraphKnobPhase.name))[1]),
        **{
            name: expected_s(costs, dev, GraphStudyPhase.trials(sweep, measured_by(name))[1])
            for name in study_phases(dev)
        },
    }
    if fusion_graphs:  # one grouping per graph, each with its budget's trials (the groupings are recorded later)
        out[FusionPhase.name] = expected_s(costs, dev, [(str(Kind.FUSION), fusion_graphs * sweep.budget.fusion_target)])
    out[WholeCheckPhase.name] = (
        WHOLE_COMPILES + (UNFROZEN_COMPILES if fusion_graphs and frozen and freezing is None else 0)
    ) * costs.expect(CAPTURE)
    return {name: s for name, s in out.items() if s > 0}


def first_trials(sweep: SweepContext, fusion_graphs: int) -> dict[str, float]:
    """{phase: the expected seconds of its first trial} for the phases whose first trial holds a gain of its own
    (``tuner.budget.gain.Profile.front_ms``): the fusion study's, which measures the space-to-depth rewrite."""
    if not fusion_graphs:
        return {}
    return {FusionPhase.name: expected_s(sweep.tuning.costs, sweep.device_type, [(str(Kind.FUSION), 1)])}


def forecast_line(budget: Any, parts: dict[str, float]) -> str:
    total = sum(parts.values())
    shown = ", ".join(f"{name} ~{s:.0f} s" for name, s in parts.items())
    line = f"--budget {budget.name} is expected to take ~{total:.0f} s more ({shown}; estimates)"
    if budget.time_budget_s is not None and total > budget.time_budget_s:
        line += f": the {budget.time_budget_s:.0f}-s time budget will cut it short, and a rerun continues"
    return line
