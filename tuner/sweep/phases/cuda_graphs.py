"""The CUDA-graph phase: where Inductor's default step leaves the device idle (the host's work, a launch per kernel,
outlasts the kernels), the workload under CUDA graphs against the defaults, once, before any other trial. Later
whole-workload trials then time the workload as it will run, where a choice between kernels is no longer hidden
behind launches: where the host's launches outlast the kernels, no kernel choice shows until they are gone."""

from __future__ import annotations

from tuner.budget.estimate import REPLAY_S
from tuner.budget import names
from tuner.budget.clock import CAPTURE, Costs, fits
from tuner.core import Forcing, Kind, TaskOutcome
from tuner.kinds import where
from tuner.measure import GraphReplay, GraphTrial, Measurement
from tuner.sweep.phases.base import Phase, Plan, SweepContext
from tuner.study.context import record
from tuner.sweep.winners import StoredWinners
from tuner.search_spaces.cuda_graph import on

# The least idle share worth a measurement: CUDA graphs gain at most the share of the step the device waits, and one
# compile buys that answer, more than most kernel searches win, even where the device is busy most of the step. Below
# 2% a gain is within the minimum a winner must beat the default by.
LEAST_IDLE = 0.02
# By hand, CUDA graphs cost no compile: the capture's compile replayed as one graph (``tuner.measure.replay``). That
# leaves out what Inductor's CUDA graphs spend on the host per call, which overlaps the device's work.
# A replay decides where the default step, less the least gain, still outlasts both the replay and GRAPH_HOST_MS; a
# closer call compiles the workload under Inductor's CUDA graphs and times that. A replay no faster than the
# defaults decides too: Inductor's CUDA graphs do the replay's work and more.
GRAPH_HOST_MS = 1.0
REPLAY = "CUDA graphs by hand"  # its cost's name in ``Costs``


def _store_defaults(sweep: SweepContext, pairs: list) -> None:
    """Off (Inductor's own choice) as the answer of each task that has none yet, as a new Triton kernel gets its
    default config: every task of a swept workload has an answer, measured or not."""
    stored = sweep.db.winner_configs([r.id for _, r in pairs], sweep.tuning.device_id)
    for t, r in pairs:
        if r.id not in stored:
            sweep.db.keep_default(r.id, sweep.tuning.device_id, t.space.default)


def kept(sweep: SweepContext, winners: StoredWinners | None = None) -> dict[int, Forcing]:
    """{task id: what it forces} of the forward graphs the sweep runs under CUDA graphs (their answer is on), from
    ``winners`` where the caller has read them already."""
    return (winners or sweep.winners()).parts(sweep.workload.pairs(where(phase=CudaGraphPhase.name)), defaults=False)


def decided(replay: Measurement, min_gain: float) -> bool:
    """Whether a replay by hand settles it: no faster than the defaults (Inductor's CUDA graphs do its work and
    more), or faster with the default step, less ``min_gain``, still longer than both the replay and
    :data:`GRAPH_HOST_MS` (the most Inductor's graphs were seen to spend on the host per call, doubled)."""
    if not replay.beats_default(min_gain):
        return True
    return (replay.baseline_ms or 0.0) * (1 - min_gain) > max(replay.median_ms or 0.0, GRAPH_HOST_MS)


def by_hand(mode: str) -> bool:
    """Whether a step of this ``--mode`` is replayed by hand (inference and decode steps; a training step's backward
    and its optimizer are compiled under Inductor's CUDA graphs and timed)."""
    return mode != "train"


def worth_measuring(idle_share: float | None) -> bool:
    """Whether the default step leaves the device idle enough for CUDA graphs to matter (unknown: measure)."""
    return idle_share is None or idle_share >= LEAST_IDLE


class CudaGraphPhase(Phase):
    name = names.CUDA_GRAPHS

    def __init__(self, idle_share: float | None, by_hand: bool = False):
        self.idle = idle_share  # of the default step (``CaptureResult.idle_share``); None: not measured
        self.by_hand = by_hand  # an inference step: replayed by hand first (``GraphReplay``), no compile
        self.pairs: list = []

    @property
    def compiles(self) -> int:
        """Compiles before its timing: none by hand, else the candidate's (the defaults' is the capture's, kept)."""
        return 0 if self.by_hand else 1

    def forecast_s(self, costs: Costs) -> float:
        """What the phase is expected to cost, for the sweep's forecast: nothing where the step keeps the device busy."""
        return self._expected(costs) if worth_measuring(self.idle) else 0.0

    def plan(self, sweep: SweepContext) -> Plan:
        every = sweep.workload.pairs(where(phase=self.name))
        _store_defaults(sweep, every)
        self.pairs = [
            (t, r) for t, r in every if sweep.db.find_trial(r.id, sweep.tuning.device_id, on()) is None
        ]  # a rerun measures it once
        if not self.pairs:
            return Plan([], 0)
        if not worth_measuring(self.idle):
            sweep.progress.note(
                f"the default step keeps the GPU busy {1 - self.idle:.0%} of its time: CUDA graphs are not measured"
            )
            return Plan([], 0)
        idle = "unknown" if self.idle is None else f"{self.idle:.0%}"
        sweep.progress.note(
            f"the GPU waits for the host {idle} of the default step: the workload under CUDA graphs is measured "
            f"first (~{self._expected(sweep.tuning.costs):.0f} s)"
        )
        return Plan([t for t, _ in self.pairs], 1)

    def _expected(self, costs: Costs) -> float:
        """Its last measurement's cost, else its compiles' (by hand: a replay's)."""
        if self.by_hand:
            return costs.expect(REPLAY) or REPLAY_S
        return costs.expect(str(Kind.CUDA_GRAPH)) or self.compiles * costs.expect(CAPTURE)

    def run(self, sweep: SweepContext, deadline: float | None) -> None:
        m = self._replayed(sweep, deadline) if self.by_hand else None
        how = " (replayed by hand)" if m is not None else ""
        if m is None:
            m = self._compiled(sweep, deadline)
        if m is None:
            sweep.progress.note("no time left to measure the workload under CUDA graphs")
            return
        wins = m.ok and m.beats_default(sweep.budget.min_gain)
        if m.ok:
            sweep.progress.note(
                f"under CUDA graphs{how}: {m.median_ms:.4g} ms against "
                f"{m.baseline_ms:.4g} ms ({m.ratio:.3f}x): " + ("kept" if wins else "Inductor's default stays")
            )
        else:
            sweep.progress.note(f"the workload under CUDA graphs failed: {m.status.value}: {m.error}")
        self._store(sweep, m, wins)

    def _replayed(self, sweep: SweepContext, deadline: float | None) -> Measurement | None:
        """The replay's measurement where it decides (:data:`GRAPH_HOST_MS`), else None (a compile decides)."""
        costs = sweep.tuning.costs
        if not fits(deadline, costs.expect(REPLAY) or REPLAY_S):
            return None
        with costs.timed(REPLAY):
            m = sweep.worker.run(GraphReplay(sweep.budget.verify_rounds, sweep.budget.min_sample_ms))
        if not m.ok:
            sweep.progress.note(
                f"the step could not be replayed as a CUDA graph by hand ({m.status.value}: {m.error}): Inductor's are compiled"
            )
            return None
        if decided(m, sweep.budget.min_gain):
            return m
        sweep.progress.note(
            f"replayed by hand as a CUDA graph: {m.median_ms:.4g} ms against {m.baseline_ms:.4g} ms, too close to "
            f"what Inductor's CUDA graphs spend on the host per call (up to ~{GRAPH_HOST_MS:g} ms): they are compiled and timed"
        )
        return None

    def _compiled(self, sweep: SweepContext, deadline: float | None) -> Measurement | None:
        """The workload compiled under Inductor's CUDA graphs against the defaults (None: no time for it)."""
        costs = sweep.tuning.costs
        if not fits(deadline, costs.expect(str(Kind.CUDA_GRAPH)) or costs.expect(CAPTURE)):
            return None
        candidate = Forcing.union(t.forcing(on()) for t, _ in self.pairs)
        with costs.timed(str(Kind.CUDA_GRAPH)):
            return sweep.worker.run(
                GraphTrial(
                    Forcing().to_json(), candidate.to_json(), sweep.budget.verify_rounds, sweep.budget.min_sample_ms
                )
            )

    def _store(self, sweep: SweepContext, m: Measurement, wins: bool) -> None:
        for t, r in self.pairs:
            trial = record(sweep.tuning, r, on(), m)
            if wins:
                sweep.db.set_winner(r.id, sweep.tuning.device_id, trial.id, on(), m.median_ms, m.baseline_ms)
            sweep.outcomes[r.id] = TaskOutcome(
                r,
                on() if wins else t.space.default,
                not wins,
                m.baseline_ms,
                m.median_ms if wins else m.baseline_ms,
                1,
                1,
            )
