"""What every study of a sweep shares (:class:`StudyContext`: the database, Optuna's storage, the budget, deadlines,
costs, the learned ranking), and :func:`record`, which stores a measurement before anyone is told of it."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from tuner.sweep.budget import Budget
from tuner.sweep.clock import CAPTURE, Costs, fits, with_instances
from tuner.kinds import beside_base
from tuner.db import Database, TaskRecord, TrialRecord
from tuner.measure.result import Measurement, Status
from tuner.search_spaces import Space

FIRST_GRAPH_TRIAL_COMPILES = 2  # the first such trial compiles its baseline (the winners so far) and its candidate
Measure = Callable[[dict[str, Any], int], Measurement]  # (config, rounds) -> measurement
MeasureMany = Callable[[list[dict[str, Any]], int], list[Measurement]]  # several configs at once (compiled in parallel)


def one_by_one(measure: Measure) -> MeasureMany:
    return lambda configs, rounds: [measure(c, rounds) for c in configs]


@dataclass
class StudyContext:
    db: Database
    storage: Any
    device_id: int
    environment_id: int
    device_fingerprint: str
    sampler: str
    seed: int
    budget: Budget
    deadline: float | None = None  # no new trial may end after this (a phase's share of the time budget)
    from_similar: bool = False  # seed each study with this task's winners on other device models
    settle_by: float | None = None  # verifications may run to this (the sweep's own deadline)
    costs: Costs = field(default_factory=Costs)  # what measurements have cost lately, shared by every phase
    rankers: Any = None  # tuner.ranking.Rankers: the learned ranking (None: off)
    prior: Any = None  # tuner.ranking.PriorRows: shipped winners of this device model, seeds when the database has none
    stored: Counter[str] = field(default_factory=Counter)  # trials this sweep stored (context.record), by status
    on_stored: Callable[[str], None] | None = None  # told each measured trial's status as it is stored (the progress bar)
    base_held: bool = False  # the worker holds the compile of the whole-workload trials' base (``Worker.holds``)

    def time_left(self) -> bool:
        return fits(self.deadline, 0.0)

    def fits(self, kind: str, reserve_s: float = 0.0) -> bool:
        """Whether one more measurement of ``kind`` (its recent cost) ends ``reserve_s`` before the deadline. Until it has been
        timed, a trial that compiles the workload (graph knobs, fusion groupings) is expected to cost two compiles:
        the first one compiles its baseline too (a resnet50 grouping's on the H200: 37 s against a 19.7-s compile;
        taken as one compile, regnet_y_400mf's ran 18 s past its phase's deadline), or one where the worker holds
        that baseline's compile (``base_held``: the CUDA-graph trial's candidate is the fusion study's base)."""
        return fits(self.deadline, self.trial_s(kind) + reserve_s)

    def trial_s(self, kind: str) -> float:
        """What one more measurement of ``kind`` is expected to cost (:meth:`fits`); 0 where unknown."""
        return self.costs.expect(kind) or self._compile_floor(kind)

    def settles(self, kind: str, fallback: str | None, compiles: int = 0, reserve_s: float = 0.0) -> bool:
        """Whether one verification-length measurement of ``kind`` ends by ``settle_by``, ``reserve_s`` before it."""
        return fits(self.settle_by, self.expected(kind, fallback, compiles) + reserve_s)

    def expected(self, kind: str, fallback: str | None, compiles: int = 0) -> float:
        """A verification of ``kind``: its recent cost, else ``fallback``'s scaled, else ``compiles`` compiles."""
        scale = self.budget.verify_rounds / max(1, self.budget.rounds)
        return self.costs.expect(kind, fallback=fallback, scale=scale) or compiles * self.costs.expect(CAPTURE)

    def _compile_floor(self, kind: str) -> float:
        compiles = 1 if self.base_held else FIRST_GRAPH_TRIAL_COMPILES
        return compiles * self.costs.expect(CAPTURE) if beside_base(kind) else 0.0

    def target(self, kind: str, unranked: int) -> int:
        """Distinct configs a task of ``kind`` measures: fewer when a learned ranking picks them."""
        return self.rankers.target(kind, unranked, self.budget.ranked) if self.rankers else unranked

    def first_configs(self, task: TaskRecord, space: Space) -> list[dict[str, Any]]:
        """What a new study measures after the default: the ranked candidates, or without a model the space's seeds
        (for a template site, every choice Inductor offered)."""
        ranked = self.rankers.first(task.kind, task.signature, space, self.budget.ranked) if self.rankers else []
        return ranked or space.seeds()

    def can_verify(self, kind: str, held: bool = False, instances: int = 1) -> bool:
        """Whether re-measuring a finalist of ``kind`` against its default ends by the phase's deadline (else the
        sweep's own): the check's share stays whole (a mobilenet_v2 sweep once verified into it and lost the check).
        ``held``: the worker holds both compiles (a whole-workload trial's, just measured), so the verification only
        times them: its trial's cost without the compile it made, at the verification's rounds. (On the H200 the Qwen2
        prefill's GEMM merge ran 0.974x its base in a 12.5-s trial, and a verification expected at twice that, compile
        included, did not fit the 21 s left.) ``instances``: of each side, the others compiled anew (two compiles each
        more) and timed beside them."""
        expected = self.expected(f"{kind}:verify", kind)
        if held and beside_base(kind):
            scale, rounds = self.budget.verify_rounds / max(1, self.budget.rounds), self.budget.verify_rounds
            # its trials' timing as measured without their compiles, else a trial less one compile (a first trial
            # compiled its base too: the Qwen2 prefill's on the H100 took 36.6 s with a 24.8-s capture compile, so 23.6
            # s were expected of a verification that re-times two compiled workloads, and the 19 s left refused it)
            trial_timing = self.costs.expect(timing_kind(kind)) or (self.costs.expect(kind) or 0.0) - (self.costs.expect(CAPTURE) or 0.0)
            timing = max(2 * rounds * self.budget.min_sample_ms / 1e3,  # two workloads, a sample each a round at least
                         scale * trial_timing)
            expected = min(expected, with_instances(timing, self.costs.expect(CAPTURE) or 0.0, instances))
        return fits(self.deadline if self.deadline is not None else self.settle_by, expected)


def open_storage(url: str, attempts: int = 5) -> Any:
    """Optuna's RDB storage on the same database. Several workers starting at once may race to create
    Optuna's tables (on PostgreSQL also its enum types: "type studydirection already exists"); the loser
    retries and finds them made."""
    import optuna
    from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

    for i in range(attempts):
        try:
            return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})
        except (IntegrityError, OperationalError, ProgrammingError):
            if i == attempts - 1:
                raise
            time.sleep(0.5 * (i + 1))
    raise AssertionError("unreachable")


class TrialSink(Protocol):
    """Where a measured trial is stored: a database, and the device and environment it was measured on."""

    db: Database
    device_id: int
    environment_id: int


def timing_kind(kind: str) -> str:
    """The cost kind of a whole-workload trial's timing alone (``Measurement.timing_s``), without its compiles."""
    return f"{kind}:timing"


def record(tuning: TrialSink, task: TaskRecord, config: dict[str, Any], m: Measurement) -> TrialRecord:
    trial = tuning.db.record_trial(task.id, tuning.device_id, tuning.environment_id, config, m.status.value, median_ms=m.median_ms,
                                   min_ms=m.min_ms, spread_ms=m.spread_ms, baseline_ms=m.baseline_ms, error=m.error)
    if (tally := getattr(tuning, "stored", None)) is not None:
        tally[m.status.value] += 1
    if (told := getattr(tuning, "on_stored", None)) is not None and m.status is not Status.INVALID:  # invalid: never measured
        told(m.status.value)
    return trial
