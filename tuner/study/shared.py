"""Asking a study that other workers share: a trial another worker took, or a config it is measuring right now, is
not measured here as well."""

from __future__ import annotations

from typing import Any


def suggest_unshared(study: Any, space: Any, ot: Any) -> dict[str, Any] | None:
    """``ot``'s config, or None (ask again) when another worker sharing the study has it: a waiting (enqueued) trial
    that two workers popped at once, which SQLite cannot lock for one of them and which the other finished first,
    or a config another worker is measuring now (``ot`` is then failed, so the sampler is asked again)."""
    import optuna

    try:
        config = space.suggest(ot)
    except optuna.exceptions.UpdateFinishedTrialError:
        return None
    running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    if any(t.number != ot.number and t.params == ot.params for t in running):
        study.tell(ot, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
        return None
    return config
