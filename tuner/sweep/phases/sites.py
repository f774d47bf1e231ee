"""The template-site phase: every selection site of the workload, tuned in site batches (one compile benchmarks a
batch of choices at every site of a claimed group), then the other workers' sites waited for. The sites are those
of the graphs as the winners so far lower them: where a kept winner rewrites a graph (a convolution over its input's
space-to-depth form, cuDNN running a convolution's epilogue, merged GEMMs), the batches compile with every winner
forced, the first records the sites it meets, and the sites it never met are dropped and its new ones tuned."""

from __future__ import annotations

from typing import Any

from tuner.budget import names
from tuner.core import Kind, TaskSpec
from tuner.kinds import where
from tuner.measure import SiteBatch, SiteTimings
from tuner.measure.result import Recording
from tuner.budget import clock
from tuner.budget.clock import fits
from tuner.sweep.epilogues import site_epilogues
from tuner.sweep.phases.base import CAPTURE, Phase, Plan, SweepContext, planned
from tuner.sweep.phases import cuda_graphs
from tuner.sweep.phases.graphs import lowering
from tuner.sweep.scheduler import tune_site_groups, wait_for_others
from tuner.settings import settings
from tuner.budget.estimate import SITE_CHOICE, SITE_CHOICE_MARGINAL, expected_s
from tuner.sweep.site_batches import EpilogueCredit, Request, choices_that_fit, site_target
from tuner.sweep.site_batches import expected_s as batched_s
from tuner.sweep.tasks import site_tasks, site_work
from tuner.sweep.winners import StoredWinners

SITE_BATCH = {"cuda": 16, "cpu": 3}  # choices per site per batch (a batch is one compile)
TIMING_SAID = {
    "cudagraph": "as CUDA-graph replays, the device's time alone, as the workload runs under CUDA graphs",
    "pipelined": "as calls back to back, the host's time counted where it exceeds the device's",
    "launch": "as Inductor times them (TUNER_SITE_TIMING=launch)",
}


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


def reshaping(sweep: SweepContext, winners: StoredWinners) -> list[str]:
    """The names of the tasks whose kept winners change which template sites the graphs make (``lowering``, where
    their space says so: ``Space.reshapes_sites``); a site's own winner never does."""
    changed = lowering(sweep, winners, ignore=(Kind.SITE,))
    return [
        t.name for t, r in sweep.workload.pairs() if r.id in changed and t.space.reshapes_sites(winners.configs[r.id])
    ]


class SitePhase(Phase):
    name = names.SITES
    compiles = 2.5  # a probe batch (a compile that also benchmarks) and the verification of its finalists

    def __init__(self, share: float = 1.0):
        self.share = share
        self.sites: list[Any] = []
        self.lowered = False  # the sites are those a compile with the winners so far forced makes (:meth:`_sites`)
        self.to_record = False  # the first site batch records those sites (:class:`_Batches`)

    def plan(self, sweep: SweepContext) -> Plan:
        # The largest first: a phase whose deadline holds fewer sites than the workload has tunes where the time is
        self.sites = sorted(self._sites(sweep), key=lambda p: -site_work(p[0]))
        tasks = [t for t, _ in self.sites]
        return Plan(tasks, *self.trials(sweep, tasks), seconds=self.expected_s(sweep, tasks))

    def _sites(self, sweep: SweepContext) -> list[Any]:
        """The (task, record) pairs of the sites to tune: the capture's, unless a kept winner changes which sites the
        graphs' lowering meets (:func:`reshaping`); then those of a recording under every winner so far forced where
        one is held, else the capture's, and the first site batch, which compiles with every winner forced, records
        the sites it meets (:meth:`run`): a recording compile of its own cost mobilenet_v3_large's H100 sweep ~31 s
        of its phase's 76, so none was made and 14 of the 46 sites tuned were sites its kept rewrites replace."""
        captured = sweep.workload.pairs(where(phase=self.name))
        winners = sweep.winners()
        self.lowered = self.to_record = False
        names = ", ".join(reshaping(sweep, winners))
        if not names:
            return captured
        self.lowered = True
        everything = winners.forcing(sweep.workload.pairs())
        if sweep.recorded_under(everything):
            return self._as_lowered(
                sweep, sweep.record(everything), captured, f"the winners so far change how the graphs lower ({names})"
            )
        self.to_record = True
        sweep.progress.note(
            f"the winners so far change how the graphs lower ({names}): the first site batch compiles with them forced and records "
            "the template sites it meets; a site it never meets is dropped, and new ones are tuned after the capture's"
        )
        return captured

    @staticmethod
    def _as_lowered(sweep: SweepContext, recording: Recording, captured: list[Any], why: str) -> list[Any]:
        """The (task, record) pairs of ``recording``'s sites, registered where new, and said beside ``captured``."""
        tasks = site_tasks(recording.sites)
        pairs = sweep.workload.register_pairs(tasks)
        kept = {t.key for t, _ in captured} & {t.key for t in tasks}
        sweep.progress.note(
            f"{why}: the template sites tuned are those a compile with them forced meets, {len(tasks)}: {len(kept)} of the "
            f"capture's {len(captured)} and {len(tasks) - len(kept)} new"
        )
        return pairs

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
        return (
            seconds
            if seconds is not None
            else expected_s(sweep.tuning.costs, sweep.device_type, SitePhase.trials(sweep, tasks)[1])
        )

    def run(self, sweep: SweepContext, deadline: float | None) -> None:
        batch = _batch(sweep)
        compile_s = sweep.tuning.costs.expect(CAPTURE)
        # The scheduler's own test too: a compile that fits with no time for a choice at a site measures nothing
        if not fits(deadline, compile_s) or not choices_that_fit(sweep.until(deadline), batch, 1):
            left = max(0.0, (deadline or 0.0) - clock.now())  # its time flows to the next phase
            sweep.progress.note(
                f"template sites skipped: a site batch is a compile (~{compile_s:.0f} s) and its choices, more than the {left:.0f} s this phase has"
            )
            return
        timing = site_timing(sweep)
        if sweep.device_type == "cuda":
            sweep.progress.note(f"template-site choices are timed {TIMING_SAID[timing]}")
        # Where the sites are those the winners' lowering makes, every winner is forced, so the batch compiles that
        # lowering
        base = sweep.winners().forcing(sweep.workload.pairs() if self.lowered else self.sites)
        measure = _Batches(sweep, base.to_json(), timing, record=self.to_record)
        credit = EpilogueCredit(
            sweep.epilogue_ms, at=sweep.epilogues, in_graph=timing == "cudagraph", device_ms=sweep.epilogue_device_ms
        )
        got, _ = tune_site_groups(
            sweep.until(deadline), self.sites, measure, batch, sweep.workers, sweep.progress, credit
        )
        if measure.recording is not None:  # the first batch's compile recorded the sites of the graphs as lowered
            sweep.keep_recording(base, measure.recording)
            sweep.epilogues.update(site_epilogues(measure.recording.sites, sweep.kernels))
            captured = {t.key for t, _ in self.sites}
            lowered = self._as_lowered(
                sweep,
                measure.recording,
                self.sites,
                "the first site batch recorded the graphs as the winners so far lower them",
            )
            new = [(t, r) for t, r in lowered if t.key not in captured]
            self.sites = lowered
            if new:
                more, _ = tune_site_groups(
                    sweep.until(deadline), new, measure, batch, sweep.workers, sweep.progress, credit
                )
                got.update(more)
        sweep.add(list(got.values()))
        wait_for_others(sweep.db, sweep.tuning, [r.id for _, r in self.sites], sweep.progress)


class _Batches:
    """The site batches' measure (``site_batches.MeasureSites``): each a compile under ``base`` in the worker; with
    ``record``, the first that compiles records the graphs and sites it meets (:attr:`recording`)."""

    def __init__(self, sweep: SweepContext, base: dict[str, Any], timing: str, record: bool):
        self.sweep, self.base, self.timing, self.record = sweep, base, timing, record
        self.recording: Recording | None = None

    def __call__(self, request: Request) -> SiteTimings:
        got = self.sweep.worker.run(
            SiteBatch(self.base, request, self.timing, record=self.record and self.recording is None)
        )
        self.recording = self.recording or got.recording
        if got.fallbacks:
            self.sweep.progress.note(
                f"{got.fallbacks} site choice(s) could not be timed {TIMING_SAID[self.timing].split(',')[0]} and were timed as "
                "Inductor times them (the worker's log says why): at their sites, timings of two kinds are compared"
            )
        return got
