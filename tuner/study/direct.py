"""Configs a task measures without asking Optuna for them: its default, what its capture points to, near tasks'
winners and the ranked candidates (``study.first_to_measure``), known before the study is asked anything.

Asked through the study, each of them would cost Optuna's RDB storage about ten writes (enqueue, pop, one per
parameter, tell), most of a site batch's time in the sweep's own process (``bench/analysis/host_cost.py``). Measured
first and then added as one finished trial each
(``Study.add_trial``), the sampler still learns from them and the dashboard still shows them. Site batches and
``run_study`` (kernels, graph knobs, fusion groupings) both measure them so; a worker that joins another's study
has no queue and samples, and may then measure one of the holder's queued configs as well.
"""

from __future__ import annotations

from typing import Any

from tuner.core import Status
from tuner.db import TrialRecord


def finished_trial(space: Any, config: dict[str, Any], trial: TrialRecord) -> Any:
    """The Optuna trial that stands for ``config``'s stored result: its parameters and their distributions as the
    space's ``suggest`` makes them (replayed on a ``FixedTrial``), its ratio to the default, or failed."""
    import optuna

    fixed = optuna.trial.FixedTrial(space.optuna_params(config))
    space.suggest(fixed)
    value = study_value(trial)
    state = optuna.trial.TrialState.FAIL if value is None else optuna.trial.TrialState.COMPLETE
    return optuna.trial.create_trial(params=fixed.params, distributions=fixed.distributions, value=value, state=state)


def study_value(trial: TrialRecord) -> float | None:
    """What a study learns from a stored trial: its ratio to the default when it was timed (a pruned probe's time
    still teaches), else None (the study's trial fails)."""
    timed = trial.status in (Status.OK.value, Status.PRUNED.value) and trial.ratio is not None
    return trial.ratio if timed else None


def add_finished(study: Any, space: Any, config: dict[str, Any], trial: TrialRecord) -> None:
    """Add ``config``'s stored result to ``study``, as though the study had asked for it."""
    study.add_trial(finished_trial(space, config, trial))
