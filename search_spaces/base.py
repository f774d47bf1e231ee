"""Search spaces as data: typed parameters, a default, validation, Optuna distributions.

A :class:`Space` never trusts a config: :meth:`Space.validate` checks keys, types,
ranges and the family's constraints, and raises :class:`InvalidConfig` with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.errors import TunerError
from tuner.keys import digest

JSONScalar = None | bool | int | float | str


class InvalidConfig(TunerError):
    """A config that does not belong to its search space."""


@dataclass(frozen=True)
class Param:
    name: str

    def check(self, value: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def suggest(self, trial: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {"type": type(self).__name__, **{k: v for k, v in self.__dict__.items() if k != "name"}}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True)
class Choice(Param):
    """One of a fixed list of JSON scalars (None, bool, int, float, str)."""

    options: tuple[JSONScalar, ...]

    def check(self, value: Any) -> None:
        for o in self.options:
            if type(o) is type(value) and o == value:
                return
        raise InvalidConfig(f"{self.name}={value!r} is not one of {list(self.options)}")

    def suggest(self, trial: Any) -> Any:
        return trial.suggest_categorical(self.name, list(self.options))

    def values(self) -> list[Any]:
        return list(self.options)


@dataclass(frozen=True)
class Bool(Param):
    def check(self, value: Any) -> None:
        if not isinstance(value, bool):
            raise InvalidConfig(f"{self.name}={value!r} must be true or false")

    def suggest(self, trial: Any) -> Any:
        return trial.suggest_categorical(self.name, [True, False])

    def values(self) -> list[Any]:
        return [True, False]


@dataclass(frozen=True)
class IntRange(Param):
    low: int
    high: int
    log: bool = False

    def check(self, value: Any) -> None:
        if not _is_int(value):
            raise InvalidConfig(f"{self.name}={value!r} must be an integer")
        if not self.low <= value <= self.high:
            raise InvalidConfig(f"{self.name}={value} is outside [{self.low}, {self.high}]")

    def suggest(self, trial: Any) -> Any:
        return trial.suggest_int(self.name, self.low, self.high, log=self.log)

    def values(self) -> list[Any]:
        return list(range(self.low, self.high + 1))


@dataclass(frozen=True)
class PowerOfTwo(Param):
    low: int
    high: int

    def check(self, value: Any) -> None:
        if not _is_int(value) or value <= 0 or value & (value - 1):
            raise InvalidConfig(f"{self.name}={value!r} must be a positive power of two")
        if not self.low <= value <= self.high:
            raise InvalidConfig(f"{self.name}={value} is outside [{self.low}, {self.high}]")

    def suggest(self, trial: Any) -> Any:
        lo, hi = int(math.log2(self.low)), int(math.log2(self.high))
        return 2 ** trial.suggest_int(self.name + "_log2", lo, hi)

    def values(self) -> list[Any]:
        return [2**e for e in range(int(math.log2(self.low)), int(math.log2(self.high)) + 1)]


Constraint = Callable[[dict[str, Any]], str | None]


@dataclass(frozen=True)
class Space:
    """A family's parameters, its default (Inductor's own choice) and its constraints."""

    family: str
    params: tuple[Param, ...]
    default: dict[str, Any]
    constraints: tuple[Constraint, ...] = field(default=(), compare=False)
    context: dict[str, Any] = field(default_factory=dict)

    def names(self) -> list[str]:
        return [p.name for p in self.params]

    def validate(self, config: Any) -> dict[str, Any]:
        if not isinstance(config, dict):
            raise InvalidConfig(f"{self.family}: a config must be an object, got {type(config).__name__}")
        unknown = sorted(set(config) - set(self.names()))
        if unknown:
            raise InvalidConfig(f"{self.family}: unknown parameter(s) {', '.join(map(str, unknown))}")
        missing = sorted(set(self.names()) - set(config))
        if missing:
            raise InvalidConfig(f"{self.family}: missing parameter(s) {', '.join(missing)}")
        for p in self.params:
            p.check(config[p.name])
        for c in self.constraints:
            reason = c(config)
            if reason:
                raise InvalidConfig(f"{self.family}: {reason}")
        return config

    def is_valid(self, config: Any) -> bool:
        try:
            self.validate(config)
        except InvalidConfig:
            return False
        return True

    def suggest(self, trial: Any) -> dict[str, Any]:
        """Ask an Optuna trial for one config (it may still break a constraint: validate it)."""
        return {p.name: p.suggest(trial) for p in self.params}

    def seeds(self) -> list[dict[str, Any]]:
        """Configs to measure first, after the default (none by default)."""
        return []

    def evidence(self) -> list[dict[str, Any]]:
        """Configs that what was seen of this very task points to, measured before any other task's winners
        (none by default)."""
        return []

    def reshapes_sites(self, config: dict[str, Any]) -> bool:
        """Whether ``config``, forced, may change which template sites the graphs' lowering meets (a graph rewritten,
        compiled unfrozen, an attention decomposed): by default any config but the default."""
        return config != self.default

    def optuna_params(self, config: dict[str, Any]) -> dict[str, Any]:
        """The Optuna parameter values that :meth:`suggest` would map to ``config`` (for enqueue_trial)."""
        out: dict[str, Any] = {}
        for p in self.params:
            out.update(self.optuna_params_of(p, config[p.name]))
        return out

    def configs(self) -> list[dict[str, Any]]:
        """Every valid config, in a fixed order (for exhaustive sweeps and grids)."""
        import itertools

        names = self.names()
        every = (dict(zip(names, vs)) for vs in itertools.product(*(p.values() for p in self.params)))
        return [c for c in every if self.is_valid(c)]

    def optuna_grid(self) -> dict[str, list[Any]]:
        """The Optuna parameter values of every parameter (GridSampler's search space)."""
        grid: dict[str, list[Any]] = {}
        for p in self.params:
            for v in p.values():
                for k, ov in self.optuna_params_of(p, v).items():
                    grid.setdefault(k, []).append(ov)
        return grid

    @staticmethod
    def optuna_params_of(p: Param, v: Any) -> dict[str, Any]:
        return {p.name + "_log2": int(math.log2(v))} if isinstance(p, PowerOfTwo) else {p.name: v}

    def size(self) -> int | None:
        n = 1
        for p in self.params:
            if isinstance(p, Choice):
                n *= len(p.options)
            elif isinstance(p, Bool):
                n *= 2
            elif isinstance(p, IntRange):
                n *= p.high - p.low + 1
            elif isinstance(p, PowerOfTwo):
                n *= int(math.log2(p.high)) - int(math.log2(p.low)) + 1
        return n

    def describe(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "params": [{"name": p.name, **p.describe()} for p in self.params],
            "default": self.default,
            "context": self.context,
        }

    def fingerprint(self) -> str:
        return digest(self.describe())


def pow2_ceil(n: int) -> int:
    """The smallest power of two ≥ ``n`` (1 for n ≤ 1)."""
    return 1 << max(0, (int(n) - 1).bit_length())


def with_default(options: list[Any], default: Any) -> list[Any]:
    """``options``, with ``default`` first when it is not among them (compared by type and value)."""
    return options if any(type(o) is type(default) and o == default for o in options) else [default, *options]


def choice(name: str, options: Sequence[JSONScalar]) -> Choice:
    return Choice(name, tuple(options))
