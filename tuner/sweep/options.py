"""What a sweep is asked to do (:class:`SweepOptions`) and what it reports (:class:`SweepReport`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tuner.budget.presets import Budget
from tuner.core import TaskOutcome
from tuner.workloads.spec import WorkloadSpec


@dataclass(frozen=True)
class SweepOptions:
    spec: WorkloadSpec
    budget: Budget
    db_url: str
    sampler: str = "tpe"
    seed: int = 0
    from_similar: bool = False
    workers: int = 1  # local workers sharing this sweep (each takes a share of the template sites)
    fusion: bool = True  # search fusion groupings per graph after the kernel winners
    ranking: bool = True  # measure the candidates a model fit on the database predicts fastest (tuner.ranking)
    prior: bool = (
        True  # also learn from (and seed with) the measurements tuner ships for this device model or its architecture
    )
    started: float | None = None  # time.monotonic() when the command started: a time budget counts from there
    time_unfrozen: bool = (
        True  # frozen inference: time the workload unfrozen first (``FreezingPhase``), else tune it frozen
    )
    skip: frozenset[str] = (
        frozenset()
    )  # phases left out (``tuner.sweep.phases.skippable``): their tasks keep Inductor's choices


@dataclass
class SweepReport:
    workload: str
    device: str
    graph_breaks: dict[str, int]
    eager_ms: float | None
    capture_compile_s: float | None = None  # the first compile, with Inductor's defaults
    outcomes: list[TaskOutcome] = field(default_factory=list)
    default_ms: float | None = None
    tuned_ms: float | None = None
    interrupted: bool = False
    wall_s: float = 0.0
    trials_measured: int = 0
    whole_checked: bool = False  # this worker measured all winners together (the last worker to finish does)
    unfrozen_ratio: float | None = None  # where the workload won unfrozen: its time over the winners' frozen
    baseline: str = "Inductor's defaults"  # what ``default_ms`` timed

    @property
    def speedup(self) -> float | None:
        return self.default_ms / self.tuned_ms if self.default_ms and self.tuned_ms else None
