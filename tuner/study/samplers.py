"""Optuna samplers by name, always seeded; optional dependencies load only when asked for."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tuner.errors import TunerError
from tuner.search_spaces import Space


def _tpe(space: Space, seed: int) -> Any:
    import optuna

    # group=True: template sites ask for block sizes only when they pick a generated Triton config
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=3, multivariate=True, group=True)


def _random(space: Space, seed: int) -> Any:
    import optuna

    return optuna.samplers.RandomSampler(seed=seed)


def _cmaes(space: Space, seed: int) -> Any:
    import optuna

    return optuna.samplers.CmaEsSampler(seed=seed)


def _gp(space: Space, seed: int) -> Any:
    import optuna

    return optuna.samplers.GPSampler(seed=seed)


def _grid(space: Space, seed: int) -> Any:
    import optuna

    class AskTellGrid(optuna.samplers.GridSampler):
        """GridSampler stops the study from ``after_trial``, which only works inside ``study.optimize``;
        tuner drives studies with ask/tell and stops by itself once every config is measured."""

        def after_trial(self, *args: Any, **kwargs: Any) -> None:
            return None

    return AskTellGrid(space.optuna_grid(), seed=seed)


SAMPLERS: dict[str, Callable[[Space, int], Any]] = {
    "tpe": _tpe,
    "random": _random,
    "cmaes": _cmaes,
    "gp": _gp,
    "grid": _grid,
}


def make_sampler(name: str, space: Space, seed: int) -> Any:
    try:
        factory = SAMPLERS[name]
    except KeyError:
        raise TunerError(f"--sampler must be one of {', '.join(SAMPLERS)}, not {name!r}") from None
    try:
        return factory(space, seed)
    except ImportError as e:
        raise TunerError(f"--sampler {name} needs a package that is not installed: {e.name}") from None
