"""The Triton-kernel phase (CUDA): capture the kernels of the graph that the winners so far produce, give each new
one Inductor's own config as its stored answer (so a compile never autotunes it, even untuned), then tune them,
largest share of the step first (time per launch x launches per step: ``tuner.sweep.tasks.kernel_tasks``). A kernel that
cannot be measured on its own is stored with a failed trial that says why."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from tuner.budget import names
from tuner.core import Forcing, TaskSpec
from tuner.db import TaskRecord
from tuner.measure import CaptureKernels, KernelBatch, Measurement, Status, Worker
from tuner.sweep.phases.base import Phase, Plan, SweepContext, planned
from tuner.sweep.phases.graphs import lowering
from tuner.sweep import credited
from tuner.sweep.scheduler import tune_tasks
from tuner.study.context import MeasureMany, record
from tuner.sweep.tasks import kernel_tasks

KERNEL_BATCH = 8  # Triton configs compiled in parallel, then timed one at a time


class KernelPhase(Phase):
    """``why`` says which winners the captured graph was compiled with; ``when`` whether this phase is due now.
    Captured even past the phases' deadline, with no time left to tune, where the compile still ends by the sweep's
    own (the time budget stands): each new kernel keeps Inductor's config as its answer, so the tuned compile
    benchmarks none. Where it does not fit, the kernels the winners make have no stored config, and the tuned compile
    autotunes them at their first call as Inductor's own does."""

    name = names.KERNELS
    past_budget = True

    def __init__(self, why: str, when: Callable[[SweepContext], bool] = lambda sweep: True, after_check: bool = False):
        self.why, self.when = why, when
        self.after_check = after_check  # its compile may use the time kept for the check, which has run
        self.kernels: list[TaskSpec] = []
        self.records: list[TaskRecord] = []
        self.captured_for: dict[int, Any] | None = (
            None  # the lowering its kernels were captured under; None: not captured
        )

    def plan(self, sweep: SweepContext) -> Plan:
        self.kernels, self.records = [], []
        if sweep.device_type != "cuda" or not self.when(sweep):
            return Plan([], 0)
        forcing = self._forcing(sweep)
        if forcing is None:
            return Plan([], 0)
        captured = sweep.worker.run(CaptureKernels(forcing.to_json()))
        if self.captured_for:  # compiled with the winners forced
            credited.unfused_epilogues(sweep, captured)
        unmeasurable = {r["key"]: (Status(r["status"]), r["error"]) for r in captured if "error" in r}
        known = sweep.workload.keys
        pairs = sweep.workload.register_pairs([t for t in kernel_tasks(captured) if t.key not in known])
        stored = sweep.db.winner_configs([r.id for _, r in pairs], sweep.tuning.device_id)
        for t, r in pairs:
            self._store_default(sweep, t, r, r.id in stored, unmeasurable.get(t.key))
            if t.key not in unmeasurable:
                self.kernels.append(t)
                self.records.append(r)
        return Plan(self.kernels, *self.trials(sweep, self.kernels))

    @staticmethod
    def trials(sweep: SweepContext, kernels: list[TaskSpec]) -> tuple[int, list[tuple[str, int]]]:
        """The trials the phase plans for ``kernels`` (fewer each with a learned ranking) and their cost kinds."""
        each = [
            (str(t.kind), planned(lambda x: sweep.tuning.target(x.kind, sweep.budget.trials), [t])) for t in kernels
        ]
        return sum(n for _, n in each), each

    def _forcing(self, sweep: SweepContext) -> Forcing | None:
        """The winners to capture the kernels under; nothing (the capture compile's kernels, no new compile) when no
        winner changes which kernels a graph lowers to, or a compile would not end by the deadline while only kernel
        configs and CUDA graphs have winners. None (no kernels to tune) when the winners lower the graphs otherwise
        and there is no time to compile them: the default compile's kernels would not run (resnet50 on the H200 tuned
        its convolutions' ReLU kernels, which cuDNN's fused epilogue had replaced, and its tuned compile then
        autotuned the kernels it did make)."""
        winners = sweep.winners()
        lowered = lowering(sweep, winners)
        if not winners.parts(sweep.workload.pairs(), defaults=False):
            sweep.progress.note(
                f"the Triton kernels of Inductor's default compile ({self.why}: every winner is the default)"
            )
        elif not sweep.can_capture(keep_end=not self.after_check):
            if lowered:
                sweep.progress.note(
                    "no time left for a compile with the winners forced, and they change which kernels the graphs "
                    "make: no Triton kernel is tuned now (those the kept winners make are captured after the check where time allows)"
                )
                return None
            sweep.progress.note(
                "no time left for a compile with the winners forced: tuning the kernels of Inductor's default compile"
            )
        else:
            sweep.progress.note(f"capturing the Triton kernels ({self.why})")
            self.captured_for = lowered
            return winners.forcing(sweep.workload.pairs())
        self.captured_for = {}
        return Forcing()

    def stale(self, sweep: SweepContext) -> bool:
        """Whether the kernels it captured (if any) are not those the stored winners make now."""
        return self.captured_for != lowering(sweep, sweep.winners())

    @staticmethod
    def _store_default(
        sweep: SweepContext, task: TaskSpec, rec: TaskRecord, has_winner: bool, failure: tuple[Status, str] | None
    ) -> None:
        """Inductor's config as a new kernel's answer; for a kernel that cannot be measured, a trial saying why."""
        tuning = sweep.tuning
        if not has_winner:
            sweep.db.keep_default(rec.id, tuning.device_id, task.space.default, None, task.signature.get("default_ms"))
        if failure is not None and sweep.db.find_trial(rec.id, tuning.device_id, task.space.default) is None:
            record(
                tuning,
                rec,
                task.space.default,
                Measurement(failure[0], error=f"cannot be measured on its own: {failure[1]}"),
            )

    def run(self, sweep: SweepContext, deadline: float | None) -> None:
        def measure_for(task: TaskSpec, _base: Any) -> MeasureMany:
            return lambda configs, rounds: measure_kernel(sweep.worker, task, configs, rounds)

        got, _ = tune_tasks(
            sweep.until(deadline),
            self.kernels,
            self.records,
            measure_for,
            sweep.winners(),
            sweep.progress,
            batch=KERNEL_BATCH,
        )
        sweep.add(got)


def measure_kernel(worker: Worker, task: TaskSpec, configs: list[dict[str, Any]], rounds: int) -> list[Measurement]:
    """A batch of one kernel's configs; if the worker is lost on the batch, each config again alone, so only
    the config that kills it is stored as ``worker_died``."""
    job = KernelBatch(task.key, tuple(configs), rounds)
    res = worker.run(job)
    if not res.lost or len(configs) == 1:
        return list(res.measurements)
    return [worker.run(dataclasses.replace(job, configs=(c,))).measurements[0] for c in configs]
