"""Settling a task: its finalist re-measured against the default in one run, and the winner stored only with a real
gain (or, with no time to verify, on a trial that timed it beside the default with a clear gain)."""

from __future__ import annotations

from typing import Any

from tuner.core import TaskOutcome
from tuner.kinds import beside_base
from tuner.db import TaskRecord, TrialRecord
from tuner.keys import config_hash
from tuner.measure.result import Measurement, Status
from tuner.study.names import annotate_study
from tuner.search_spaces import Space

from tuner.study.context import Measure, StudyContext, record


def finalist(
    tuning: StudyContext, task: TaskRecord, space: Space
) -> tuple[list[TrialRecord], TrialRecord | None, TrialRecord | None]:
    """The task's measured trials on this device, its latest trial of the default, and its best other config
    when that beats the default by the budget's gain (else None)."""
    ok = [t for t in tuning.db.trials(task.id, tuning.device_id) if t.status == Status.OK.value and t.ratio is not None]
    default_hash = config_hash(space.default)
    default = next((t for t in reversed(ok) if config_hash(t.config) == default_hash), None)
    candidates = sorted((t for t in ok if config_hash(t.config) != default_hash), key=lambda t: t.ratio or 9e9)
    top = (
        candidates[0]
        if candidates and candidates[0].ratio is not None and candidates[0].ratio < 1 - tuning.budget.min_gain
        else None
    )
    return ok, default, top


def keep_for_verifying(tuning: StudyContext, task: TaskRecord, space: Space) -> float:
    """Seconds a study keeps before its deadline for verifying: once a trial has beaten the default by the budget's
    gain, that trial's verification, so a measured gain is not given up for one more exploratory trial."""
    if finalist(tuning, task, space)[2] is None:
        return 0.0
    return tuning.expected(f"{space.family}:verify", space.family)


def settle(
    tuning: StudyContext,
    task: TaskRecord,
    space: Space,
    default: TrialRecord | None,
    default_ms: float | None,
    top: TrialRecord | None,
    m: Measurement | None,
) -> TaskOutcome:
    """Store the task's winner: ``top`` when ``m``, its re-measurement against the default, shows the gain again;
    else the default."""
    winner, best_ms, is_default = space.default, default_ms, True
    trial_id = default.id if default else None
    if top is not None and m is not None:
        rec = record(tuning, task, top.config, m)
        if m.beats_default(tuning.budget.min_gain):
            winner, best_ms, default_ms, is_default, trial_id = top.config, m.median_ms, m.baseline_ms, False, rec.id
        elif m.ok:
            default_ms = best_ms = m.baseline_ms
    return _store_winner(tuning, task, trial_id, winner, is_default, default_ms, best_ms)


def _store_winner(
    tuning: StudyContext,
    task: TaskRecord,
    trial_id: int | None,
    winner: dict[str, Any],
    is_default: bool,
    default_ms: float | None,
    best_ms: float | None,
) -> TaskOutcome:
    """Store the task's winner and return its outcome; the study carries it as user attributes (the dashboard)."""
    tuning.db.set_winner(task.id, tuning.device_id, trial_id, winner, best_ms, default_ms)
    total = len(tuning.db.trials(task.id, tuning.device_id))
    outcome = TaskOutcome(task, winner, is_default, default_ms, best_ms, 0, total)
    annotate_study(tuning, task, outcome)
    return outcome


# With no time left to verify, a finalist still wins on its own trial when it was this much faster than the default
# timed beside it in the same run (a site batch's finalist, a graph-level trial; numerics checked), far past the
# noise between two runs.
UNVERIFIED_GAIN = 0.10
# ... or, for a whole-workload trial (its base timed beside it, interleaved), by TIGHT_GAINS times the budget's gain
# where that is also TIGHT_SPREADS times the trial's own interquartile range. A trial whose timing spreads as wide as
# its gain (a noisy CPU's) still needs its verification.
TIGHT_GAINS, TIGHT_SPREADS = 2.0, 4.0


def choose_winner(tuning: StudyContext, task: TaskRecord, space: Space, measure: Measure) -> TaskOutcome:
    """Re-measure the best candidate against the default in one run; it wins only with a real gain. A verification
    that would end past ``settle_by`` is not started: the stored answer stays until a rerun verifies, unless the
    candidate's trial timed it beside the default (``TaskKind.beside_base``) with a clear gain (``UNVERIFIED_GAIN``)."""
    ok, default, top = finalist(tuning, task, space)
    default_ms = default.median_ms if default else (ok[0].baseline_ms if ok else None)
    verify = verifier(measure)
    if top is not None and not tuning.can_verify(
        space.family, held=held(measure, top.config), instances=getattr(verify, "instances", 1)
    ):
        if beside_base(task.kind):
            return settle_measured(
                tuning, task, space, default, top, UNVERIFIED_GAIN, tight=tuning.budget.min_gain * TIGHT_GAINS
            )
        return unverified(tuning, task, space, default_ms)
    m = None
    if top is not None:
        with tuning.costs.timed(f"{space.family}:verify"):
            m = verify(top.config, tuning.budget.verify_rounds)
    return settle(tuning, task, space, default, default_ms, top, m)


def verifier(measure: Measure) -> Measure:
    """What re-measures a finalist: the measure's own ``verify`` where it has one (a whole-workload trial's on the
    CPU, which also times fresh instances of both sides: its ``instances``), else the measure."""
    return getattr(measure, "verify", None) or measure


def held(measure: Measure, config: dict[str, Any]) -> bool:
    """Whether re-measuring ``config`` finds its compile and its base's in the worker (a whole-workload trial's
    measure says so through its ``holds``): its verification then only times them."""
    holds = getattr(measure, "holds", None)
    return bool(holds is not None and holds(config))


def clearly_faster(top: TrialRecord | None, gain: float, tight: float | None = None) -> bool:
    """Whether ``top``'s own trial beat the default timed beside it by ``gain`` (its ratio at most 1 - ``gain``), or
    by ``tight`` where its gain is also :data:`TIGHT_SPREADS` times its measured spread."""
    if top is None or top.ratio is None or not top.median_ms or not top.baseline_ms:
        return False
    if top.ratio <= 1 - gain:
        return True
    past_noise = top.spread_ms is not None and top.baseline_ms - top.median_ms >= TIGHT_SPREADS * top.spread_ms
    return tight is not None and top.ratio <= 1 - tight and past_noise


def settle_measured(
    tuning: StudyContext,
    task: TaskRecord,
    space: Space,
    default: TrialRecord | None,
    top: TrialRecord | None,
    gain: float,
    tight: float | None = None,
) -> TaskOutcome:
    """No time to verify: ``top`` wins on its own trial (timed beside the default in one run, numerics checked) when
    that beat the default by ``gain``, far past the noise between two runs, or by ``tight`` and many times its own
    spread (:func:`clearly_faster`); else, as :func:`unverified`."""
    default_ms = default.median_ms if default else (top.baseline_ms if top else None)
    if not clearly_faster(top, gain, tight):
        return unverified(tuning, task, space, default_ms)
    return settle_won(tuning, task, top)


def settle_won(tuning: StudyContext, task: TaskRecord, trial: TrialRecord) -> TaskOutcome:
    """Store ``trial``'s config as the task's winner, on that trial's own timing beside the default."""
    return _store_winner(tuning, task, trial.id, trial.config, False, trial.baseline_ms, trial.median_ms)


def unverified(tuning: StudyContext, task: TaskRecord, space: Space, default_ms: float | None) -> TaskOutcome:
    """The outcome of a task whose finalist had no time to be verified: its stored winner stays (Inductor's default
    when it has none yet), and a rerun verifies."""
    current = tuning.db.winner_config(task.id, tuning.device_id)
    if current is None:
        tuning.db.keep_default(task.id, tuning.device_id, space.default, default_ms, default_ms)
        current = space.default
    total = len(tuning.db.trials(task.id, tuning.device_id))
    return TaskOutcome(task, current, current == space.default, default_ms, None, 0, total)
