"""The template-site phase: every selection site of the workload, tuned in site batches (one compile benchmarks a
batch of choices at every site of a claimed group), then the other workers' sites waited for."""

from __future__ import annotations

from typing import Any

from tuner.core import TaskSpec
from tuner.kinds import where
from tuner.measure import SiteBatch, SiteTimings
from tuner.sweep import clock
from tuner.sweep.clock import fits
from tuner.sweep.phases.base import CAPTURE, Phase, Plan, SweepContext, planned
from tuner.sweep.phases import cuda_graphs
from tuner.sweep.scheduler import tune_site_groups, wait_for_others
from tuner.settings import settings
from tuner.sweep.estimate import SITE_CHOICE, SITE_CHOICE_MARGINAL, expected_s
from tuner.sweep.site_batches import Request, choices_that_fit, site_target
from tuner.sweep.site_batches import expected_s as batched_s
from tuner.sweep.tasks import site_work

SITE_BATCH = {"cuda": 16, "cpu": 3}  # choices per site per batch (a batch is one compile)
TIMING_SAID = {"cudagraph": "as CUDA-graph replays, the device's time alone, as the workload runs under CUDA graphs",
               "pipelined": "as calls back to back, the host's time counted where it exceeds the device's",
               "launch": "as Inductor times them (TUNER_SITE_TIMING=launch)"}


def _batch(sweep: SweepContext) -> int:
    """The device's choices per site a batch. Its prior share of a batch per choice, where it has one (a batch: a
    compile, then a share per choice, ``site_batches``), is put first where the batches' cost line reads it."""
    if sweep.device_type in SITE_CHOICE_MARGINAL:
        sweep.tuning.costs.slopes.setdefault(SITE_CHOICE, SITE_CHOICE_MARGINAL[sweep.device_type])
    return SITE_BATCH.get(sweep.device_type, SITE_BATCH["cpu"])


def _targets(sweep: SweepContext, tasks: list[TaskSpec]) -> list[int]:
    """Each site's planned trials: its target, capped by its space's size."""
    return [planned(lambda t: site_target(sweep.tuning, t), [t]) for t in tasks]


def site_timing(sweep: SweepContext) -> str:
    """How the sites' choices are timed: ``TUNER_SITE_TIMING``, or with ``auto`` as the workload will run: as
    CUDA-graph replays where the sweep keeps CUDA graphs (the host's time is then gone from the step), else back to
    back. Timed back to back, host time the graphs remove decides: an LLM prefill's Triton GEMM templates won so and
    lost under CUDA graphs."""
    how = settings().site_timing
    if how != "auto":
        return how
    return "cudagraph" if cuda_graphs.kept(sweep) else "pipelined"


class SitePhase(Phase):
    name = "template sites"
    compiles = 2.5  # a probe batch (a compile that also benchmarks) and the verification of its finalists

    def __init__(self, share: float = 1.0):
        self.share = share
        self.sites: list[Any] = []

    def plan(self, sweep: SweepContext) -> Plan:
        # The largest first: a phase whose deadline holds fewer sites than the workload has tunes where the time is
        self.sites = sorted(sweep.workload.pairs(where(phase=self.name)), key=lambda p: -site_work(p[0]))
        tasks = [t for t, _ in self.sites]
        return Plan(tasks, *self.trials(sweep, tasks), seconds=self.expected_s(sweep, tasks))

    @staticmethod
    def trials(sweep: SweepContext, tasks: list[TaskSpec]) -> tuple[int, list[tuple[str, int]]]:
        """The trials the phase plans for ``tasks`` and what they cost: each site's target, and its closing
        verification (each site's finalist and its default, in one compile)."""
        trials = sum(_targets(sweep, tasks))
        return trials, [(SITE_CHOICE, trials + 2 * len(tasks))]

    @staticmethod
    def expected_s(sweep: SweepContext, tasks: list[TaskSpec]) -> float:
        """What the phase is expected to take: its batches' compiles and choices (``site_batches.expected_s``), else
        its trials at the prior cost of a choice."""
        seconds = batched_s(sweep.tuning, _targets(sweep, tasks), _batch(sweep))
        return seconds if seconds is not None else expected_s(sweep.tuning.costs, sweep.device_type, SitePhase.trials(sweep, tasks)[1])

    def run(self, sweep: SweepContext, deadline: float | None) -> None:
        batch = _batch(sweep)
        compile_s = sweep.tuning.costs.expect(CAPTURE)
        # The scheduler's own test too: a compile that fits with no time for a choice at a site measures nothing
        if not fits(deadline, compile_s) or not choices_that_fit(sweep.until(deadline), batch, 1):
            left = max(0.0, (deadline or 0.0) - clock.now())  # its time flows to the next phase
            sweep.progress.note(f"template sites skipped: a site batch is a compile (~{compile_s:.0f} s) and its choices, more than the {left:.0f} s this phase has")
            return
        timing = site_timing(sweep)
        if sweep.device_type == "cuda":
            sweep.progress.note(f"template-site choices are timed {TIMING_SAID[timing]}")
        base = sweep.winners().forcing(self.sites).to_json()

        def measure(request: Request) -> SiteTimings:
            got = sweep.worker.run(SiteBatch(base, request, timing))
            if got.fallbacks:
                sweep.progress.note(f"{got.fallbacks} site choice(s) could not be timed {TIMING_SAID[timing].split(',')[0]} and were timed as "
                                    "Inductor times them (the worker's log says why): at their sites, timings of two kinds are compared")
            return got

        got, _ = tune_site_groups(sweep.until(deadline), self.sites, measure, batch, sweep.workers, sweep.progress, sweep.epilogue_ms)
        sweep.add(list(got.values()))
        wait_for_others(sweep.db, sweep.tuning, [r.id for _, r in self.sites], sweep.progress)
