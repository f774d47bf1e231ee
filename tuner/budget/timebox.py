"""A study's time box: the budget, what measurements have cost lately (``Costs``), the phase's deadline and the
sweep's own, and whether the next measurement of a kind fits before them."""

from __future__ import annotations

from dataclasses import dataclass, field

from tuner.budget import clock
from tuner.budget.clock import CAPTURE, Costs, fits, with_instances
from tuner.budget.estimate import FIRST_GRAPH_TRIAL_COMPILES
from tuner.budget.presets import Budget
from tuner.kinds import beside_base


@dataclass(kw_only=True)
class Timebox:
    budget: Budget
    deadline: float | None = None  # no new trial may end after this (a phase's share of the time budget)
    settle_by: float | None = None  # verifications may run to this (the sweep's own deadline)
    costs: Costs = field(default_factory=Costs)  # what measurements have cost lately, shared by every phase
    base_held: bool = False  # the worker holds the compile of the whole-workload trials' base (``Worker.holds``)

    def time_left(self) -> bool:
        return fits(self.deadline, 0.0)

    def fits(self, kind: str, reserve_s: float = 0.0) -> bool:
        """Whether one more measurement of ``kind`` (its recent cost) ends ``reserve_s`` before the deadline. Until it
        has been timed, a trial that compiles the workload (graph knobs, fusion groupings) is expected to cost two
        compiles, as the first one compiles its baseline too; or one, where the worker holds that baseline's compile
        (``base_held``: the CUDA-graph trial's candidate is the fusion study's base)."""
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

    def can_verify(self, kind: str, held: bool = False, instances: int = 1) -> bool:
        """Whether re-measuring a finalist of ``kind`` against its default ends by the phase's deadline (else the
        sweep's own): the check's share stays whole. ``held``: the worker holds both compiles (a whole-workload
        trial's, just measured), so the verification only times them: its trial's cost without the compile it made,
        at the verification's rounds. ``instances``: of each side, the others compiled anew (two compiles each more)
        and timed beside them."""
        expected = self.expected(f"{kind}:verify", kind)
        if held and beside_base(kind):
            scale, rounds = self.budget.verify_rounds / max(1, self.budget.rounds), self.budget.verify_rounds
            # its trials' timing as measured without their compiles, else a trial less one compile (a first trial
            # compiled its base too, which a verification of two held compiles does not)
            trial_timing = self.costs.expect(timing_kind(kind)) or (self.costs.expect(kind) or 0.0) - (
                self.costs.expect(CAPTURE) or 0.0
            )
            timing = max(
                2 * rounds * self.budget.min_sample_ms / 1e3,  # two workloads, a sample each a round at least
                scale * trial_timing,
            )
            expected = min(expected, with_instances(timing, self.costs.expect(CAPTURE) or 0.0, instances))
        return fits(self.deadline if self.deadline is not None else self.settle_by, expected)


def timing_kind(kind: str) -> str:
    """The cost kind of a whole-workload trial's timing alone (``Measurement.timing_s``), without its compiles."""
    return f"{kind}:timing"


def deadline_for(end: float | None, share: float, compiles: float, compile_s: float) -> float | None:
    """A deadline ``share`` of the way from now to ``end`` (None without a time budget), but at least ``compiles``
    compiles of the workload (``compile_s`` each) from now when ``end`` leaves room for them: a phase whose every step
    is a compile (a site batch) is not given less than one step while the sweep could afford it."""
    if end is None:
        return None
    t = clock.now()
    left = max(0.0, end - t)
    return t + min(left, max(share * left, compiles * compile_s))
