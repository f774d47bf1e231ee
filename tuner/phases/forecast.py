"""The expected time of a whole sweep, said before its phases start: each phase's planned trials (as the phases
will plan them) times the cost per trial (``tuner.estimate``), from what the capture compile found. An estimate,
labelled as one; the later phases' tasks may still change (a fusion grouping that wins makes new kernels)."""

from __future__ import annotations

from typing import Any

from tuner.clock import CAPTURE
from tuner.core import GRAPH_KINDS, Kind, TaskSpec
from tuner.estimate import SITE_CHOICE, expected_s
from tuner.phases.base import SweepContext, planned
from tuner.site_batches import site_target
from tuner.tasks import kernel_tasks

WHOLE_COMPILES = 2  # the whole-workload check: the winners' compile and the defaults'


def forecast(sweep: SweepContext, kernel_records: list[dict[str, Any]], fusion: bool) -> dict[str, float]:
    """{phase: expected seconds} for the phases this sweep will run, from the capture's tasks and kernels."""
    t, costs, dev = sweep.tuning, sweep.tuning.costs, sweep.device_type
    tasks = sweep.workload.tasks
    sites = [x for x in tasks if x.kind == Kind.SITE]
    graphs = [x for x in tasks if x.kind in GRAPH_KINDS and x.space.size() != 1]
    kernels = kernel_tasks(kernel_records)
    out = {
        "template sites": expected_s(costs, dev, [(SITE_CHOICE, planned(lambda x: site_target(t, x), sites) + 2 * len(sites))]),
        "Triton kernels": expected_s(costs, dev, [(k.kind, _kernel_trials(sweep, k)) for k in kernels]),
        "graph knobs": expected_s(costs, dev, [(str(g.kind), planned(t.budget.trials, [g])) for g in graphs]),
    }
    if fusion:
        n_graphs = sum(1 for x in tasks if x.kind in GRAPH_KINDS)
        out["fusion groupings"] = expected_s(costs, dev, [(str(Kind.FUSION), n_graphs * t.budget.site_target)])
    out["whole-workload check"] = WHOLE_COMPILES * costs.expect(CAPTURE)
    return {name: s for name, s in out.items() if s > 0}


def _kernel_trials(sweep: SweepContext, task: TaskSpec) -> int:
    return planned(lambda x: sweep.tuning.target(x.kind, sweep.budget.trials), [task])


def forecast_line(budget: Any, parts: dict[str, float]) -> str:
    total = sum(parts.values())
    shown = ", ".join(f"{name} ~{s:.0f} s" for name, s in parts.items())
    line = f"--budget {budget.name} is expected to take ~{total:.0f} s more ({shown}; estimates)"
    if budget.time_budget_s is not None and total > budget.time_budget_s:
        line += f": the {budget.time_budget_s:.0f}-s time budget will cut it short, and a rerun continues"
    return line
