"""The template-site phase: every selection site of the workload, tuned in site batches (one compile benchmarks a
batch of choices at every site of a claimed group), then the other workers' sites waited for. The sites are those
of the graphs as the winners so far lower them: where a kept winner rewrites a graph (a convolution over its input's
space-to-depth form, cuDNN running a convolution's epilogue, merged GEMMs), a compile with them forced records the
sites it makes, and their batches time them with those winners forced."""

from __future__ import annotations

from typing import Any

from tuner.core import Forcing, Kind, TaskSpec
from tuner.errors import WorkloadError
from tuner.kinds import where
from tuner.measure import SiteBatch, SiteTimings
from tuner.sweep import clock
from tuner.sweep.clock import fits
from tuner.sweep.phases.base import CAPTURE, Phase, Plan, SweepContext, deadline_for, planned
from tuner.sweep.phases import cuda_graphs
from tuner.sweep.phases.graphs import lowering
from tuner.sweep.scheduler import tune_site_groups, wait_for_others
from tuner.settings import settings
from tuner.sweep.estimate import SITE_CHOICE, SITE_CHOICE_MARGINAL, expected_s
from tuner.sweep.site_batches import Request, choices_that_fit, site_target
from tuner.sweep.site_batches import expected_s as batched_s
from tuner.sweep.tasks import site_tasks, site_work
from tuner.sweep.winners import Winners

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


def reshaping(sweep: SweepContext, winners: Winners) -> list[str]:
    """The names of the tasks whose kept winners change which template sites the graphs make (``lowering``, where
    their space says so: ``Space.reshapes_sites``); a site's own winner never does."""
    changed = lowering(sweep, winners, ignore=(Kind.SITE,))
    return [t.name for t, r in sweep.workload.pairs() if r.id in changed and t.space.reshapes_sites(winners.configs[r.id])]


class SitePhase(Phase):
    name = "template sites"
    compiles = 2.5  # a probe batch (a compile that also benchmarks) and the verification of its finalists

    def __init__(self, share: float = 1.0):
        self.share = share
        self.sites: list[Any] = []
        self.lowered = False  # the sites are those a compile with the winners so far forced made (:meth:`_sites`)

    def plan(self, sweep: SweepContext) -> Plan:
        # The largest first: a phase whose deadline holds fewer sites than the workload has tunes where the time is
        self.sites = sorted(self._sites(sweep), key=lambda p: -site_work(p[0]))
        tasks = [t for t, _ in self.sites]
        return Plan(tasks, *self.trials(sweep, tasks), seconds=self.expected_s(sweep, tasks))

    def _sites(self, sweep: SweepContext) -> list[Any]:
        """The (task, record) pairs of the sites to tune: the capture's, unless a kept winner changes which sites the
        graphs' lowering meets (:func:`reshaping`); then those a recording compile with every winner so far forced
        meets (registered as new tasks where the capture had none), where that compile and a batch after it fit this
        phase's time."""
        captured = sweep.workload.pairs(where(phase=self.name))
        winners = sweep.winners()
        self.lowered = False
        names = ", ".join(reshaping(sweep, winners))
        if not names:
            return captured
        everything = winners.forcing(sweep.workload.pairs())
        if not self._can_record(sweep, everything, len(captured)):
            sweep.progress.note(f"the winners so far change how the graphs lower ({names}), but a compile recording the template sites they "
                                "make and a site batch after it do not fit this phase's time: the sites the capture recorded are tuned")
            return captured
        try:
            tasks = site_tasks(sweep.record(everything).sites)
        except WorkloadError as e:  # the worker is replaced by the next job; the captured sites are still real sites
            sweep.progress.note(f"recording the template sites with the winners so far forced failed ({e}): the sites the capture recorded are tuned")
            return captured
        pairs = list(zip(tasks, sweep.workload.register(tasks)))
        kept = {t.key for t, _ in captured} & {t.key for t in tasks}
        sweep.progress.note(f"the winners so far change how the graphs lower ({names}): the template sites tuned are those a compile with them "
                            f"forced meets, {len(tasks)}: {len(kept)} of the capture's {len(captured)} and {len(tasks) - len(kept)} new")
        self.lowered = True
        return pairs

    def _can_record(self, sweep: SweepContext, forcing: Forcing, sites: int) -> bool:
        """Whether a recording compile under ``forcing`` (none where one is held) and a site batch of at least one
        choice at ``sites`` sites end by this phase's deadline, and the recording by the phases'."""
        compile_s = sweep.tuning.costs.expect(CAPTURE)
        record_s = 0.0 if sweep.recorded_under(forcing) else compile_s
        if record_s and not sweep.can_capture(keep_end=True):
            return False
        deadline = deadline_for(sweep, self.share, self.compiles)
        if deadline is None:
            return True
        return fits(deadline, record_s + compile_s) and choices_that_fit(sweep.until(deadline - record_s), _batch(sweep), sites) > 0

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
        # Where the sites are those the winners' lowering makes, every winner is forced, so the batch compiles that lowering
        base = sweep.winners().forcing(sweep.workload.pairs() if self.lowered else self.sites).to_json()

        def measure(request: Request) -> SiteTimings:
            got = sweep.worker.run(SiteBatch(base, request, timing))
            if got.fallbacks:
                sweep.progress.note(f"{got.fallbacks} site choice(s) could not be timed {TIMING_SAID[timing].split(',')[0]} and were timed as "
                                    "Inductor times them (the worker's log says why): at their sites, timings of two kinds are compared")
            return got

        got, _ = tune_site_groups(sweep.until(deadline), self.sites, measure, batch, sweep.workers, sweep.progress, sweep.epilogue_ms)
        sweep.add(list(got.values()))
        wait_for_others(sweep.db, sweep.tuning, [r.id for _, r in self.sites], sweep.progress)
