"""Search budgets: frozen presets plus explicit overrides."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from tuner.errors import TunerError


@dataclass(frozen=True)
class Budget:
    name: str
    trials: int  # measured trials per task (a rerun continues up to this many)
    rounds: int  # interleaved timing rounds per trial
    min_sample_ms: float  # each timing sample lasts at least this long
    verify_rounds: int  # rounds when a finalist is re-measured against the default
    min_gain: float  # a finalist must beat the default by this fraction to win
    time_budget_s: float | None = None  # wall-clock limit of the whole sweep
    trial_timeout_s: float = 900.0
    site_trials: int | None = None  # template sites (a round of them costs a whole compile); None: ``trials``
    ranked: int = 8  # with a learned ranking: candidates measured per task, the predicted fastest (tuner.ranking)
    fusion_trials: int | None = None  # per graph (a trial is a whole compile and its timing); None: ``site_target``
    as_fast_as_max_autotune: bool = False  # with no time budget given, take one that ends before max-autotune would

    @property
    def site_target(self) -> int:
        return self.site_trials or self.trials

    @property
    def fusion_target(self) -> int:
        return self.fusion_trials or self.site_target


PRESETS = {
    "quick": Budget(
        "quick", trials=6, rounds=10, min_sample_ms=20.0, verify_rounds=20, min_gain=0.02, ranked=4, fusion_trials=3
    ),
    # Fusion: Inductor's grouping, the (up to 3) seeds from other graphs' winning knobs, and one more; each is a
    # whole compile, so more would take the default sweep past max-autotune's compile.
    "default": Budget(
        "default",
        trials=20,
        rounds=15,
        min_sample_ms=25.0,
        verify_rounds=30,
        min_gain=0.02,
        site_trials=8,
        fusion_trials=5,
        as_fast_as_max_autotune=True,
    ),
    "full": Budget("full", trials=60, rounds=25, min_sample_ms=30.0, verify_rounds=40, min_gain=0.01, ranked=16),
}


# The share of max-autotune's expected compile time a budget sized by it takes as its time budget: a sweep usually
# ends before its time budget, and may end 1.1x past it (+20 s) at worst (tuner.budget.shares.promised_end_s).
MAX_AUTOTUNE_SHARE = 0.9


def within_max_autotune(budget: Budget, max_autotune_s: float | None, floor_s: float = 0.0) -> Budget:
    """``budget`` with a time budget of ``MAX_AUTOTUNE_SHARE`` x max-autotune's expected compile time, but at least
    ``floor_s`` (what the sweep's first trial needs, where max-autotune's compile is shorter than that), where it asks
    for one (``as_fast_as_max_autotune``), none was given and there is an estimate; else ``budget`` unchanged."""
    if not budget.as_fast_as_max_autotune or budget.time_budget_s is not None or not max_autotune_s:
        return budget
    return dataclasses.replace(budget, time_budget_s=round(max(MAX_AUTOTUNE_SHARE * max_autotune_s, floor_s)))


MAX_TIME_BUDGET_S = 7 * 24 * 3600


def make_budget(preset: str = "default", *, trials: int | None = None, time_budget_s: float | None = None) -> Budget:
    try:
        b = PRESETS[preset]
    except KeyError:
        raise TunerError(f"--budget must be one of {', '.join(PRESETS)}, not {preset!r}") from None
    if trials is not None:
        if trials < 1:
            raise TunerError("--trials must be at least 1")
        b = dataclasses.replace(b, trials=trials, site_trials=None, as_fast_as_max_autotune=False)
    if time_budget_s is not None:
        if not math.isfinite(time_budget_s) or not 0 < time_budget_s <= MAX_TIME_BUDGET_S:
            raise TunerError(
                f"--time-budget must be a number of seconds above 0 and at most {MAX_TIME_BUDGET_S} (a week), "
                f"not {time_budget_s!r}"
            )
        b = dataclasses.replace(b, time_budget_s=time_budget_s)
    return b
